"""Confidence intervals the evals report: ratio estimators (BPB) and proportions (passkey, RULER-style).

BPB is a ratio of sums, sum(nats) / (ln 2 * sum(bytes)), over units (eval batches, windows).
Its standard error follows from the delta method (linearisation of a ratio estimator, as in
survey sampling): with R = sum(n_i) / sum(b_i) over k units and residuals r_i = n_i - R b_i,
    se(R) ~= sqrt( sum(r_i^2) / (k (k - 1)) ) / mean(b_i).
It needs no resampling, is exact for the point estimate, and is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def ratio_ci(nums: Sequence[float], dens: Sequence[float], z: float = Z95) -> tuple[float, float, float]:
    """(ratio, ci_low, ci_high) of sum(nums)/sum(dens); the interval is NaN with fewer than 2 units."""
    k = len(nums)
    total_d = float(sum(dens))
    if k == 0 or total_d <= 0:
        return float("nan"), float("nan"), float("nan")
    ratio = float(sum(nums)) / total_d
    if k < 2:
        return ratio, float("nan"), float("nan")
    mean_d = total_d / k
    ss = sum((n - ratio * d) ** 2 for n, d in zip(nums, dens))
    se = math.sqrt(ss / (k * (k - 1))) / mean_d
    return ratio, ratio - z * se, ratio + z * se


def wilson_ci(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion (sensible at 0/n and n/n, unlike the normal one); NaN at n = 0."""
    if n <= 0:
        return float("nan"), float("nan")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_ci(values: Sequence[float], z: float = Z95) -> tuple[float, float, float]:
    """(mean, low, high) of scores in [0, 1] over independent units: Wilson when every score is 0 or 1,
    else the normal interval clipped to [0, 1]; NaN when empty."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    mean = sum(values) / n
    if all(v in (0.0, 1.0) for v in values):
        lo, hi = wilson_ci(sum(values), n, z)
        return mean, lo, hi
    if n < 2:
        return mean, float("nan"), float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = z * sd / math.sqrt(n)
    return mean, max(0.0, mean - half), min(1.0, mean + half)
