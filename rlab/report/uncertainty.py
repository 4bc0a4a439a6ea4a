"""Seeded bootstrap intervals: is a variant's difference from the baseline real, or noise?

Two metrics, two resampling units, both following the metric's own definition:

* **BPB** is a ratio of sums, ``sum(nats) / (ln 2 * sum(bytes))``, over eval *units* (batches or
  windows, listed in ``bpb_units.csv``). We resample units with replacement and recompute the ratio
  (never an average of per-unit BPBs, which would weight short units like long ones). The units are
  the same across variants, so a difference is bootstrapped *paired*: one draw of unit ids serves
  both variants, which cancels the variance the two share (hard documents are hard for everyone).
* **CORE** is the mean over tasks of centered accuracy ``(acc - b) / (1 - b)``. We resample examples
  within each task (stratified, so every task keeps its size) and recompute the mean; the difference
  vs the baseline is paired on ``(task, index)`` where both variants scored the example.

Intervals are percentile intervals. Every draw uses a generator seeded from ``(seed, key)`` so the
output is identical run to run and does not depend on the order in which intervals are computed.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

LN2 = math.log(2.0)
DEFAULT_BOOT = 1000
DEFAULT_LEVEL = 0.95
_MAX_DRAW_ELEMENTS = 4_000_000  # bound the (n_boot, n) index matrix; larger draws are chunked


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile bootstrap interval."""

    estimate: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """Half the interval's width: the number printed after ``±``."""
        return (self.high - self.low) / 2.0

    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0 (a difference that is not noise)."""
        return self.low > 0.0 or self.high < 0.0


@dataclass(frozen=True)
class PairedDiff:
    """Variant minus baseline, paired on shared units: absolute and relative (percent of baseline)."""

    diff: Interval
    rel_pct: Interval
    n_shared: int
    """How many units / examples both sides had (the pairing's size)."""


def rng_for(seed: int, key: str) -> np.random.Generator:
    """A generator that depends only on `seed` and a stable label (not on call order)."""
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def _percentiles(samples: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _draw_sums(rng: np.random.Generator, columns: list[np.ndarray], n_boot: int) -> list[np.ndarray]:
    """For each bootstrap draw of len(columns[0]) indices, the sum of every column over the draw.

    Returns one (n_boot,) array per column; all columns share the same draws (that is the pairing).
    """
    n = len(columns[0])
    sums = [np.empty(n_boot, dtype=np.float64) for _ in columns]
    chunk = max(1, _MAX_DRAW_ELEMENTS // max(n, 1))
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))  # (chunk, n)
        for out, col in zip(sums, columns, strict=True):
            out[start:stop] = col[idx].sum(axis=1)
    return sums


def bpb_ratio(nats: np.ndarray, nbytes: np.ndarray) -> float:
    """BPB of a set of units: summed nats over ln 2 times summed bytes."""
    total = float(np.sum(nbytes))
    return float(np.sum(nats)) / (LN2 * total) if total > 0 else float("nan")


def bpb_interval(
    nats: np.ndarray, nbytes: np.ndarray, *, key: str, seed: int = 0, n_boot: int = DEFAULT_BOOT,
    level: float = DEFAULT_LEVEL,
) -> Interval | None:
    """BPB with a bootstrap interval over units; None when there are no units."""
    nats, nbytes = np.asarray(nats, dtype=np.float64), np.asarray(nbytes, dtype=np.float64)
    if len(nats) == 0:
        return None
    s_nats, s_bytes = _draw_sums(rng_for(seed, key), [nats, nbytes], n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        samples = s_nats / (LN2 * s_bytes)
    low, high = _percentiles(samples, level)
    return Interval(bpb_ratio(nats, nbytes), low, high)


def bpb_paired_diff(
    nats_a: np.ndarray, bytes_a: np.ndarray, nats_b: np.ndarray, bytes_b: np.ndarray, *, key: str,
    seed: int = 0, n_boot: int = DEFAULT_BOOT, level: float = DEFAULT_LEVEL,
) -> PairedDiff | None:
    """BPB(a) - BPB(b) over units aligned by position (the caller joins on unit id); None if empty."""
    cols = [np.asarray(c, dtype=np.float64) for c in (nats_a, bytes_a, nats_b, bytes_b)]
    if len(cols[0]) == 0:
        return None
    na, ba, nb, bb = _draw_sums(rng_for(seed, key), cols, n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        bpb_a, bpb_b = na / (LN2 * ba), nb / (LN2 * bb)
        diff_s, rel_s = bpb_a - bpb_b, (bpb_a / bpb_b - 1.0) * 100.0
    point_a, point_b = bpb_ratio(cols[0], cols[1]), bpb_ratio(cols[2], cols[3])
    return PairedDiff(
        diff=Interval(point_a - point_b, *_percentiles(diff_s, level)),
        rel_pct=Interval((point_a / point_b - 1.0) * 100.0, *_percentiles(rel_s, level)),
        n_shared=len(cols[0]),
    )


def _task_accuracy_draws(rng: np.random.Generator, correct: np.ndarray, n_boot: int) -> np.ndarray:
    """(n_boot,) bootstrap accuracies of one task's 0/1 outcomes."""
    (sums,) = _draw_sums(rng, [correct], n_boot)
    return sums / len(correct)


def _centered(acc: np.ndarray | float, baseline: float) -> np.ndarray | float:
    return (acc - baseline) / (1.0 - baseline)


def core_interval(
    tasks: dict[str, np.ndarray], baselines: dict[str, float], *, key: str, seed: int = 0,
    n_boot: int = DEFAULT_BOOT, level: float = DEFAULT_LEVEL,
) -> Interval | None:
    """CORE (mean centered accuracy over tasks) with a stratified bootstrap over examples.

    `tasks` maps task label -> 0/1 outcomes of its examples; `baselines` maps label -> random-guess
    accuracy as a fraction. Tasks with no examples are skipped; None when no task remains.
    """
    labels = sorted(t for t, c in tasks.items() if len(c) > 0)
    if not labels:
        return None
    total = np.zeros(n_boot)
    point = 0.0
    for label in labels:
        correct = np.asarray(tasks[label], dtype=np.float64)
        b = baselines.get(label, 0.0)
        total += _centered(_task_accuracy_draws(rng_for(seed, f"{key}/{label}"), correct, n_boot), b)
        point += _centered(float(correct.mean()), b)
    samples = total / len(labels)
    return Interval(point / len(labels), *_percentiles(samples, level))


def core_paired_diff(
    pairs: dict[str, tuple[np.ndarray, np.ndarray]], baselines: dict[str, float], *, key: str,
    seed: int = 0, n_boot: int = DEFAULT_BOOT, level: float = DEFAULT_LEVEL,
) -> PairedDiff | None:
    """CORE(a) - CORE(b) over examples both scored: `pairs` maps task -> (correct_a, correct_b) aligned.

    The same example draw is applied to both sides. `rel_pct` is relative to the baseline's CORE on
    the shared examples. None when no task has shared examples.
    """
    labels = sorted(t for t, (a, _) in pairs.items() if len(a) > 0)
    if not labels:
        return None
    tot_a, tot_b = np.zeros(n_boot), np.zeros(n_boot)
    pt_a = pt_b = 0.0
    n_shared = 0
    for label in labels:
        a, b_ = (np.asarray(x, dtype=np.float64) for x in pairs[label])
        base = baselines.get(label, 0.0)
        s_a, s_b = _draw_sums(rng_for(seed, f"{key}/{label}"), [a, b_], n_boot)
        tot_a += _centered(s_a / len(a), base)
        tot_b += _centered(s_b / len(b_), base)
        pt_a += _centered(float(a.mean()), base)
        pt_b += _centered(float(b_.mean()), base)
        n_shared += len(a)
    k = len(labels)
    core_a, core_b = tot_a / k, tot_b / k
    point_a, point_b = pt_a / k, pt_b / k
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_s = (core_a / core_b - 1.0) * 100.0 * np.sign(core_b)
        rel_point = (point_a / point_b - 1.0) * 100.0 * np.sign(point_b) if point_b != 0 else float("nan")
    finite = rel_s[np.isfinite(rel_s)]
    rel = (Interval(rel_point, *_percentiles(finite, level)) if len(finite) == n_boot
           else Interval(rel_point, float("nan"), float("nan")))
    return PairedDiff(
        diff=Interval(point_a - point_b, *_percentiles(core_a - core_b, level)),
        rel_pct=rel,
        n_shared=n_shared,
    )


def verdict(diff: Interval | None, lower_is_better: bool) -> str:
    """'better' / 'worse' only when the difference's interval excludes 0; else '≈ within noise'."""
    if diff is None or math.isnan(diff.low) or math.isnan(diff.high):
        return ""
    if not diff.excludes_zero():
        return "≈ within noise"
    improved = diff.high < 0 if lower_is_better else diff.low > 0
    return "better" if improved else "worse"
