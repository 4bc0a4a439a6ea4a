"""From eval units to `rlab.report.stats.inference`: which units are independent, and what each estimate averages.

The statistics (studentized intervals, sign-flip tests, seeds, families) are in `inference`; this module says how
each eval's units enter them:

* **BPB** (val/train, and BPB vs context length) is a ratio of sums, ``sum(nats) / (ln 2 * sum(bytes))``. Units
  carry a *cluster* id, the document they come from; units of one document are summed into one cluster (blocks of
  one document share its topic, style and difficulty), and the clusters are the independent units. Both arms score
  the same text, so the bytes are shared weights.
* **CORE** is the mean over tasks of centered accuracy ``(acc - b) / (1 - b)``: a weighted mean of 0/1 outcomes
  over examples, stratified by task (each task keeps its size; the variance is pooled within tasks).
* **Passkey**: 0/1 outcomes per trial, paired by key across arms (the same seeded keys in every arm); trials that
  share a key are one unit. Per-cell accuracies get Wilson score intervals (tables).

Every array may carry a leading seed axis ``(S, n)``: S training replicates of one arm scored on the same units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlab.report.stats import inference as inf
from rlab.report.stats.inference import MIN_UNITS, Comparison, as_seeds, cluster_sums, rng_for

__all__ = [
    "DEFAULT_DRAWS",
    "MIN_UNITS",
    "PairedDiff",
    "bpb_interval",
    "bpb_paired_diff",
    "bpb_ratio",
    "core_interval",
    "core_paired_diff",
    "passkey_paired_diff",
    "wilson",
]

LN2 = math.log(2.0)
DEFAULT_DRAWS = inf.SIGN_FLIP_DRAWS
"""Monte Carlo draws per skew-corrected sign-flip test (`rlab report --draws`)."""
DEFAULT_LEVEL = inf.LEVEL
_Z95 = 1.959963984540054


@dataclass(frozen=True)
class PairedDiff:
    """Variant minus baseline, paired on shared units: absolute, and relative where the baseline is positive."""

    diff: Comparison
    rel_pct: tuple[float, float, float] | None
    """(estimate, low, high) in percent of the baseline; None where the baseline is not positive."""
    n_units: int
    """Independent units both sides had (clusters / examples / keys)."""


def bpb_ratio(nats: np.ndarray, nbytes: np.ndarray) -> float:
    """BPB of a set of units: summed nats over ln 2 times summed bytes (mean over seeds for (S, n))."""
    nats, nbytes = as_seeds(nats), as_seeds(nbytes)
    total = nbytes.sum(axis=1)
    if np.any(total <= 0):
        return math.nan
    return float(np.mean(nats.sum(axis=1) / (LN2 * total)))


def bpb_interval(
    nats: np.ndarray, nbytes: np.ndarray, *, clusters: Sequence | np.ndarray | None = None
) -> Comparison | None:
    """BPB with its studentized interval over clusters (documents); None when there are no units.

    `nats`, `nbytes`: per unit, (n,) or (S, n) for S seeds; `clusters`: the document of each unit."""
    nats, nbytes = as_seeds(nats), as_seeds(nbytes)
    if nats.shape[1] == 0:
        return None
    values, weights = inf.ratio_values(cluster_sums(nats, clusters), cluster_sums(nbytes[:1], clusters))
    return inf.level(values, weights)


def bpb_paired_diff(
    nats_a: np.ndarray,
    bytes_a: np.ndarray,
    nats_b: np.ndarray,
    bytes_b: np.ndarray,
    *,
    key: str,
    clusters: Sequence | np.ndarray | None = None,
    seed: int = 0,
    draws: int = DEFAULT_DRAWS,
) -> PairedDiff | None:
    """BPB(a) - BPB(b) over units aligned by position (the caller joins on unit id); None if empty.

    Shapes (S_a, n) and (S_b, n) (or (n,)); `clusters` gives each unit's document. Both arms scored the same
    text, so b's bytes are the weights of both."""
    na, nb = as_seeds(nats_a), as_seeds(nats_b)
    if na.shape[1] == 0:
        return None
    va, weights = inf.ratio_values(cluster_sums(na, clusters), cluster_sums(as_seeds(bytes_b)[:1], clusters))
    vb, _ = inf.ratio_values(cluster_sums(nb, clusters), cluster_sums(as_seeds(bytes_b)[:1], clusters))
    diff = inf.compare(va, vb, weights, rng=rng_for(seed, key), draws=draws)
    return PairedDiff(diff, inf.relative(diff, bpb_ratio(nb, bytes_b)), diff.n_units)


def _core_values(tasks: dict[str, np.ndarray], baselines: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Per-example values whose mean is CORE, (S, N), and each example's task (the stratum).

    CORE = (1/T) sum_t (acc_t - b_t) / (1 - b_t); example i of task t contributes
    N / (T n_t) * (correct_i - b_t) / (1 - b_t), so the plain mean over all N examples is CORE."""
    labels = sorted(t for t, c in tasks.items() if c.shape[-1] > 0)
    total = sum(tasks[t].shape[-1] for t in labels)
    parts, strata = [], []
    for t in labels:
        b, outcomes = baselines.get(t, 0.0), tasks[t]
        parts.append(total / (len(labels) * outcomes.shape[-1]) * (outcomes - b) / (1.0 - b))
        strata += [t] * outcomes.shape[-1]
    return np.concatenate(parts, axis=1), np.asarray(strata)


def core_interval(tasks: dict[str, np.ndarray], baselines: dict[str, float]) -> Comparison | None:
    """CORE (mean centered accuracy over tasks) with a studentized interval stratified by task.

    `tasks` maps task label -> 0/1 outcomes, (n,) or (S, n); `baselines` maps label -> random-guess accuracy as
    a fraction. Tasks with no examples are skipped; None when no task remains."""
    side = {t: as_seeds(c) for t, c in tasks.items() if np.asarray(c).shape[-1] > 0}
    if not side:
        return None
    values, strata = _core_values(side, baselines)
    return inf.level(values, strata=strata)


def core_paired_diff(
    pairs: dict[str, tuple[np.ndarray, np.ndarray]],
    baselines: dict[str, float],
    *,
    key: str,
    seed: int = 0,
    draws: int = DEFAULT_DRAWS,
) -> PairedDiff | None:
    """CORE(a) - CORE(b) over examples both scored: `pairs` maps task -> (correct_a, correct_b) aligned.

    `rel_pct` only where the baseline's CORE is positive. None when no task has shared examples."""
    pairs = {t: (as_seeds(a), as_seeds(b)) for t, (a, b) in pairs.items() if np.asarray(a).shape[-1] > 0}
    if not pairs:
        return None
    va, strata = _core_values({t: p[0] for t, p in pairs.items()}, baselines)
    vb, _ = _core_values({t: p[1] for t, p in pairs.items()}, baselines)
    diff = inf.compare(va, vb, strata=strata, rng=rng_for(seed, key), draws=draws)
    return PairedDiff(diff, inf.relative(diff, float(vb.mean())), diff.n_units)


def passkey_paired_diff(
    correct_a: np.ndarray,
    correct_b: np.ndarray,
    keys: Sequence | np.ndarray,
    *,
    key: str,
    seed: int = 0,
    draws: int = DEFAULT_DRAWS,
) -> PairedDiff | None:
    """Passkey accuracy of a minus b over trials aligned by position, (S, n) or (n,); trials of one key are one
    unit (weights: trials per key). With one seed each the test is the exact/Monte Carlo sign flip of
    McNemar's discordant pairs."""
    ca, cb = as_seeds(correct_a), as_seeds(correct_b)
    if ca.shape[1] == 0:
        return None
    weights = cluster_sums(np.ones((1, ca.shape[1])), keys)[0]
    diff = inf.compare(
        cluster_sums(ca, keys), cluster_sums(cb, keys), weights, rng=rng_for(seed, key), draws=draws
    )
    return PairedDiff(diff, None, diff.n_units)


def wilson(successes: float, n: int) -> Comparison | None:
    """Accuracy over n independent keys with its 95% Wilson score interval (sensible at 0 and 1); no test."""
    if n <= 0:
        return None
    p = successes / n
    z2 = _Z95 * _Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Comparison(
        p,
        max(0.0, centre - half),
        min(1.0, centre + half),
        math.nan,
        math.nan,
        None,
        n,
        method="wilson",
        reason="a level, not a test",
    )
