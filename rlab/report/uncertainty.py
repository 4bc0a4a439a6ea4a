"""Seeded bootstrap intervals over independent units: is a difference from the baseline real, or noise?

A bootstrap is only honest when it resamples units that are independent of one another. Blocks cut
from one document share its topic, style and difficulty, so they are resampled together:

* **BPB** (val/train, and BPB vs context length) is a ratio of sums, ``sum(nats) / (ln 2 * sum(bytes))``.
  Eval units (documents, or blocks of documents) carry a *cluster* id, the document they come from; the
  bootstrap draws whole clusters with replacement and recomputes the ratio (a cluster bootstrap; with no
  cluster ids every unit is its own cluster). The units are the same across variants, so a difference is
  bootstrapped *paired*: one draw of clusters serves both sides.
* **CORE** is the mean over tasks of centered accuracy ``(acc - b) / (1 - b)``; examples are drawn within
  each task (stratified, every task keeps its size), paired on examples both sides scored.
* **Passkey** cells are proportions over independent keys: Wilson score intervals per cell; a
  difference gets Newcombe's score interval and a two-proportion test.

**Seeds.** Every array may carry a leading seed axis ``(S, n)``: S training replicates of one arm, all
scored on the same units. The estimate is the mean over seeds; the bootstrap is two-level (draw seeds
with replacement, then clusters), so intervals include seed-to-seed variation. When both sides of a
difference have the same seeds, the seed draw is shared (seed i of both arms saw the same data order).

Draws are multinomial count matrices, so every resample is a matrix product (vectorised, cheap at
several thousand resamples). Each draw uses a generator seeded from ``(seed, key)``, so the report is
identical run to run. Every result records ``n_units``: the number of independent units behind it.
A two-sided p-value (from the bootstrap standard error) comes with every difference, for the multiplicity
correction (`holm`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

LN2 = math.log(2.0)
DEFAULT_BOOT = 4000
"""Resamples per interval: the printed 95% endpoints are stable to their last digit at this count."""
DEFAULT_LEVEL = 0.95
MIN_UNITS = 20
"""Below this many independent units a bootstrap interval is not trusted and no verdict is given."""
_MAX_DRAW_ELEMENTS = 4_000_000  # bound the (n_boot, n) count matrix; larger draws are chunked
_Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile bootstrap interval and what it rests on."""

    estimate: float
    low: float
    high: float
    n_units: int = 0
    """Independent units (documents, examples, keys) behind the estimate."""
    n_seeds: int = 1
    """Training replicates averaged (1 = training noise not covered)."""
    p_value: float = math.nan
    """Two-sided p-value of "the true value is 0" (differences only; see `boot_p_value`)."""

    @property
    def half_width(self) -> float:
        """Half the interval's width: the number printed after ``±``."""
        return (self.high - self.low) / 2.0

    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0 (a difference that is not noise)."""
        return self.low > 0.0 or self.high < 0.0


@dataclass(frozen=True)
class PairedDiff:
    """Variant minus baseline, paired on shared units: absolute, and relative where the baseline is positive."""

    diff: Interval
    rel_pct: Interval | None
    """Percent of the baseline; None where the baseline is not (reliably) positive."""
    n_units: int
    """Independent units both sides had (clusters / examples)."""


def rng_for(seed: int, key: str) -> np.random.Generator:
    """A generator that depends only on `seed` and a stable label (not on call order)."""
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def _percentiles(samples: np.ndarray, level: float) -> tuple[float, float]:
    finite = samples[np.isfinite(samples)]
    if len(finite) == 0:
        return math.nan, math.nan
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return float(low), float(high)


def boot_p_value(samples: np.ndarray, estimate: float) -> float:
    """Two-sided p-value of "the true difference is 0" from the bootstrap distribution (normal approximation:
    z = estimate / bootstrap standard error). Unlike tail counting it resolves p far below 1 / n_boot, which
    a Holm correction over a large family needs; the verdict also requires the percentile interval to
    exclude 0, so the two never disagree in the direction of a claim."""
    finite = samples[np.isfinite(samples)]
    if len(finite) < 2 or math.isnan(estimate):
        return math.nan
    se = float(np.std(finite, ddof=1))
    if se == 0.0:
        return 1.0 if estimate == 0.0 else 0.0
    return math.erfc(abs(estimate) / se / math.sqrt(2.0))


def _count_chunks(rng: np.random.Generator, n: int, n_boot: int) -> Iterator[np.ndarray]:
    """Bootstrap draws of n units with replacement as (chunk, n) count matrices (float), n_boot rows in all."""
    chunk = max(1, _MAX_DRAW_ELEMENTS // max(n, 1))
    for start in range(0, n_boot, chunk):
        k = min(chunk, n_boot - start)
        idx = rng.integers(0, n, size=(k, n)) + (np.arange(k) * n)[:, None]
        yield np.bincount(idx.ravel(), minlength=k * n).reshape(k, n).astype(np.float64)


def _as_seeds(x: np.ndarray) -> np.ndarray:
    """(n,) -> (1, n); (S, n) unchanged."""
    x = np.asarray(x, dtype=np.float64)
    return x[None, :] if x.ndim == 1 else x


def cluster_sums(values: np.ndarray, clusters: Sequence | np.ndarray | None) -> np.ndarray:
    """Sum per-unit values (S, n) within clusters -> (S, C), clusters in sorted-id order (None: unchanged)."""
    values = _as_seeds(values)
    if clusters is None:
        return values
    _, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    out = np.zeros((values.shape[0], int(inverse.max()) + 1 if len(inverse) else 0))
    np.add.at(out.T, inverse.ravel(), values.T)
    return out


def _seed_draws(
    rng: np.random.Generator, n_seeds: Sequence[int], n_boot: int, share: bool
) -> list[np.ndarray]:
    """Per arm, (n_boot, S) indices of the seeds drawn (with replacement); shared when `share`."""
    if share and len(set(n_seeds)) == 1:
        idx = rng.integers(0, n_seeds[0], size=(n_boot, n_seeds[0]))
        return [idx] * len(n_seeds)
    return [rng.integers(0, s, size=(n_boot, s)) for s in n_seeds]


def _mean_over_drawn_seeds(per_seed: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """per_seed (n_boot, S), idx (n_boot, S) -> (n_boot,) mean of the drawn seeds' values."""
    return np.take_along_axis(per_seed, idx, axis=1).mean(axis=1)


def ratio_draws(
    arms: list[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator, n_boot: int, share_seeds: bool = True
) -> list[np.ndarray]:
    """Two-level bootstrap of BPB for arms on the same C clusters: one (n_boot,) sample array per arm.

    Each arm is (nats, bytes) per cluster, shape (S, C). All arms share the cluster draw (pairing).
    """
    n_clusters = arms[0][0].shape[1]
    per_seed = [np.empty((n_boot, nats.shape[0])) for nats, _ in arms]
    row = 0
    for counts in _count_chunks(rng, n_clusters, n_boot):
        k = len(counts)
        for out, (nats, nbytes) in zip(per_seed, arms, strict=True):
            with np.errstate(divide="ignore", invalid="ignore"):
                out[row : row + k] = (counts @ nats.T) / (LN2 * (counts @ nbytes.T))
        row += k
    idx = _seed_draws(rng, [a[0].shape[0] for a in arms], n_boot, share_seeds)
    return [_mean_over_drawn_seeds(p, i) for p, i in zip(per_seed, idx, strict=True)]


def bpb_ratio(nats: np.ndarray, nbytes: np.ndarray) -> float:
    """BPB of a set of units: summed nats over ln 2 times summed bytes (mean over seeds for (S, n))."""
    nats, nbytes = _as_seeds(nats), _as_seeds(nbytes)
    total = nbytes.sum(axis=1)
    if np.any(total <= 0):
        return math.nan
    return float(np.mean(nats.sum(axis=1) / (LN2 * total)))


def bpb_interval(
    nats: np.ndarray,
    nbytes: np.ndarray,
    *,
    key: str,
    clusters: Sequence | np.ndarray | None = None,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
    level: float = DEFAULT_LEVEL,
) -> Interval | None:
    """BPB with a (two-level) cluster bootstrap interval; None when there are no units.

    `nats`, `nbytes`: per unit, (n,) or (S, n) for S seeds; `clusters`: the document of each unit.
    """
    nats, nbytes = _as_seeds(nats), _as_seeds(nbytes)
    if nats.shape[1] == 0:
        return None
    cn, cb = cluster_sums(nats, clusters), cluster_sums(nbytes, clusters)
    (samples,) = ratio_draws([(cn, cb)], rng_for(seed, key), n_boot)
    low, high = _percentiles(samples, level)
    return Interval(bpb_ratio(nats, nbytes), low, high, n_units=cn.shape[1], n_seeds=cn.shape[0])


def _relative(
    a: np.ndarray, b: np.ndarray, point_a: float, point_b: float, n_units: int, n_seeds: int, level: float
) -> Interval | None:
    """(a / b - 1) in percent, only when the baseline is positive in the estimate and in every draw."""
    if not point_b > 0 or not np.all(b > 0):
        return None
    rel = (a / b - 1.0) * 100.0
    return Interval(
        (point_a / point_b - 1.0) * 100.0,
        *_percentiles(rel, level),
        n_units=n_units,
        n_seeds=n_seeds,
        p_value=boot_p_value(rel, (point_a / point_b - 1.0) * 100.0),
    )


def bpb_paired_diff(
    nats_a: np.ndarray,
    bytes_a: np.ndarray,
    nats_b: np.ndarray,
    bytes_b: np.ndarray,
    *,
    key: str,
    clusters: Sequence | np.ndarray | None = None,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
    level: float = DEFAULT_LEVEL,
) -> PairedDiff | None:
    """BPB(a) - BPB(b) over units aligned by position (the caller joins on unit id); None if empty.

    Shapes (S_a, n) and (S_b, n) (or (n,)); `clusters` gives each unit's document.
    """
    na, ba, nb, bb = (_as_seeds(c) for c in (nats_a, bytes_a, nats_b, bytes_b))
    if na.shape[1] == 0:
        return None
    arms = [
        (cluster_sums(na, clusters), cluster_sums(ba, clusters)),
        (cluster_sums(nb, clusters), cluster_sums(bb, clusters)),
    ]
    sa, sb = ratio_draws(arms, rng_for(seed, key), n_boot)
    point_a, point_b = bpb_ratio(na, ba), bpb_ratio(nb, bb)
    n_units, n_seeds = arms[0][0].shape[1], min(na.shape[0], nb.shape[0])
    diff = sa - sb
    return PairedDiff(
        diff=Interval(
            point_a - point_b,
            *_percentiles(diff, level),
            n_units=n_units,
            n_seeds=n_seeds,
            p_value=boot_p_value(diff, point_a - point_b),
        ),
        rel_pct=_relative(sa, sb, point_a, point_b, n_units, n_seeds, level),
        n_units=n_units,
    )


def _centered(acc: np.ndarray | float, baseline: float) -> np.ndarray | float:
    return (acc - baseline) / (1.0 - baseline)


def _core_draws(
    sides: list[dict[str, np.ndarray]], baselines: dict[str, float], rng: np.random.Generator, n_boot: int
) -> tuple[list[np.ndarray], list[float], int]:
    """Stratified two-level bootstrap of CORE for sides scored on the same examples.

    Each side maps task -> 0/1 outcomes (S, n_task). Returns per side (n_boot,) draws and the point
    estimate (mean over seeds), and the number of examples.
    """
    labels = sorted(t for t, c in sides[0].items() if c.shape[-1] > 0)
    totals = [np.zeros((n_boot, side[labels[0]].shape[0])) for side in sides]
    points = [np.zeros(side[labels[0]].shape[0]) for side in sides]
    n_examples = 0
    for label in labels:
        b = baselines.get(label, 0.0)
        n = sides[0][label].shape[1]
        n_examples += n
        row = 0
        for counts in _count_chunks(rng, n, n_boot):
            k = len(counts)
            for tot, side in zip(totals, sides, strict=True):
                tot[row : row + k] += _centered((counts @ side[label].T) / n, b)
            row += k
        for pt, side in zip(points, sides, strict=True):
            pt += _centered(side[label].mean(axis=1), b)
    idx = _seed_draws(rng, [t.shape[1] for t in totals], n_boot, share=True)
    draws = [_mean_over_drawn_seeds(t / len(labels), i) for t, i in zip(totals, idx, strict=True)]
    return draws, [float(np.mean(p / len(labels))) for p in points], n_examples


def core_interval(
    tasks: dict[str, np.ndarray],
    baselines: dict[str, float],
    *,
    key: str,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
    level: float = DEFAULT_LEVEL,
) -> Interval | None:
    """CORE (mean centered accuracy over tasks) with a stratified bootstrap over examples.

    `tasks` maps task label -> 0/1 outcomes, (n,) or (S, n); `baselines` maps label -> random-guess
    accuracy as a fraction. Tasks with no examples are skipped; None when no task remains.
    """
    side = {t: _as_seeds(c) for t, c in tasks.items() if np.asarray(c).shape[-1] > 0}
    if not side:
        return None
    (draws,), (point,), n = _core_draws([side], baselines, rng_for(seed, key), n_boot)
    return Interval(point, *_percentiles(draws, level), n_units=n, n_seeds=next(iter(side.values())).shape[0])


def core_paired_diff(
    pairs: dict[str, tuple[np.ndarray, np.ndarray]],
    baselines: dict[str, float],
    *,
    key: str,
    seed: int = 0,
    n_boot: int = DEFAULT_BOOT,
    level: float = DEFAULT_LEVEL,
) -> PairedDiff | None:
    """CORE(a) - CORE(b) over examples both scored: `pairs` maps task -> (correct_a, correct_b) aligned.

    The same example draw is applied to both sides. `rel_pct` only where the baseline's CORE is positive.
    None when no task has shared examples.
    """
    pairs = {t: (_as_seeds(a), _as_seeds(b)) for t, (a, b) in pairs.items() if np.asarray(a).shape[-1] > 0}
    if not pairs:
        return None
    sides = [{t: p[0] for t, p in pairs.items()}, {t: p[1] for t, p in pairs.items()}]
    (da, db), (pa, pb), n = _core_draws(sides, baselines, rng_for(seed, key), n_boot)
    n_seeds = min(next(iter(s.values())).shape[0] for s in sides)
    diff = da - db
    return PairedDiff(
        diff=Interval(
            pa - pb,
            *_percentiles(diff, level),
            n_units=n,
            n_seeds=n_seeds,
            p_value=boot_p_value(diff, pa - pb),
        ),
        rel_pct=_relative(da, db, pa, pb, n, n_seeds, level),
        n_units=n,
    )


# ---------------------------------------------------------------- proportions (passkey keys)


def wilson(successes: float, n: int) -> Interval | None:
    """Accuracy over n independent keys with its 95% Wilson score interval (sensible at 0 and 1)."""
    if n <= 0:
        return None
    p = successes / n
    z2 = _Z95 * _Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n_units=n)


def proportion_diff(k_a: float, n_a: int, k_b: float, n_b: int) -> Interval | None:
    """p_a - p_b of two independent sets of keys: Newcombe's score interval and a pooled two-proportion p."""
    wa, wb = wilson(k_a, n_a), wilson(k_b, n_b)
    if wa is None or wb is None:
        return None
    d = wa.estimate - wb.estimate
    low = d - math.sqrt((wa.estimate - wa.low) ** 2 + (wb.high - wb.estimate) ** 2)
    high = d + math.sqrt((wa.high - wa.estimate) ** 2 + (wb.estimate - wb.low) ** 2)
    pooled = (k_a + k_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    p = 1.0 if se == 0 else math.erfc(abs(d) / se / math.sqrt(2))
    return Interval(d, low, high, n_units=min(n_a, n_b), p_value=p)


# ---------------------------------------------------------------- multiplicity and verdicts


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN and does not count in the family)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(len(p), np.nan)
    valid = np.flatnonzero(np.isfinite(p))
    m = len(valid)
    running = 0.0
    for rank, i in enumerate(valid[np.argsort(p[valid], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def too_few(n_units: int | None) -> bool:
    return n_units is not None and n_units < MIN_UNITS


def verdict(diff: Interval | None, lower_is_better: bool, *, significant: bool | None = None) -> str:
    """'better' / 'worse' only when the difference is significant; else '≈ within noise'.

    `significant` is the (multiplicity-adjusted) decision; by default the interval excluding 0. With
    fewer than `MIN_UNITS` independent units there is no verdict: "too few units (n=...)".
    """
    if diff is None or math.isnan(diff.estimate):
        return ""
    if diff.n_units and too_few(diff.n_units):  # before the bounds: one unit has no interval at all
        return f"too few units (n={diff.n_units})"
    if math.isnan(diff.low) or math.isnan(diff.high):
        return ""
    if not (diff.excludes_zero() if significant is None else significant):
        return "≈ within noise"
    improved = diff.estimate < 0 if lower_is_better else diff.estimate > 0
    return "better" if improved else "worse"
