"""Confidence intervals for the ratio estimators the evals report.

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
