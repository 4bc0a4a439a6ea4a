"""The standard error of a paired difference (or of one arm's level) and its degrees of freedom.

se² is a unit term (the variance of the linearised unit contributions, pooled within strata when there are
strata) plus a seed term (the variance of the per-seed estimates, with several seeds); df are Welch-Satterthwaite's
over both, the seed term taken at its upper confidence bound (`SEED_DF_QUANTILE`). `rlab.report.stats.inference`
builds its tests, intervals and planned standard errors on these.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def _unit_terms(z: np.ndarray, strata: np.ndarray | None) -> list[tuple[float, float]]:
    """(variance of the mean of z, df) per stratum; one term without strata. Strata of one unit add nothing."""
    n = len(z)
    if strata is None:
        return [(float(np.var(z, ddof=1)) / n, n - 1.0)] if n >= 2 else []
    terms = []
    for label in np.unique(strata):
        part = z[strata == label]
        if len(part) >= 2:
            terms.append((len(part) * float(np.var(part, ddof=1)) / n**2, len(part) - 1.0))
    return terms


def satterthwaite(terms: list[tuple[float, float]], fallback: float) -> tuple[float, float]:
    """(se, df) of a sum of independent variance terms (Welch-Satterthwaite)."""
    total = sum(v for v, _ in terms)
    if total <= 0:
        return 0.0, fallback
    denom = sum(v * v / df for v, df in terms if v > 0 and df > 0)
    return math.sqrt(total), (total * total / denom if denom > 0 else fallback)


def _seed_estimates(y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return y.sum(axis=1) / weights.sum()


def se_terms(
    ya: np.ndarray, yb: np.ndarray | None, weights: np.ndarray, strata: np.ndarray | None
) -> tuple[float, float, float, int, float, list[tuple[float, float]], np.ndarray]:
    """(estimate, se, df, seeds, unit term, seed terms (variance, df), unit contributions z) of mean(a) - mean(b)
    (or of a alone when `yb` is None); se² = unit term + seed terms, df Welch-Satterthwaite's over them."""
    n = ya.shape[1]
    a_s = _seed_estimates(ya, weights)
    b_s = _seed_estimates(yb, weights) if yb is not None else np.zeros(1)
    estimate = float(a_s.mean() - b_s.mean())
    d = ya.mean(axis=0) - (yb.mean(axis=0) if yb is not None else 0.0)
    z = (d - estimate * weights) / weights.mean()
    terms = _unit_terms(z, strata)
    seed_terms = _seed_terms(a_s, b_s if yb is not None else None)
    se, _ = satterthwaite(terms + seed_terms, max(n - 1.0, 1.0))
    _, df = satterthwaite(terms + [(v * upper_factor(d), d) for v, d in seed_terms], max(n - 1.0, 1.0))
    seeds = min(len(a_s), len(b_s)) if yb is not None else len(a_s)
    return estimate, se, df, seeds, sum(v for v, _ in terms), seed_terms, z


SEED_DF_QUANTILE = 0.1
"""The df of a comparison over seeds are Satterthwaite's with the seed term at its 90% upper confidence bound: a
seed variance estimated on 2-4 df is often far too small, and Satterthwaite's df taken at face value then trust
it (7-8% false positives at 3-5 seeds with training noise dominant, in simulation)."""


def upper_factor(df: float) -> float:
    """Factor to a variance estimate's upper confidence bound at `SEED_DF_QUANTILE` on `df` degrees of freedom."""
    return float(df / stats.chi2.ppf(SEED_DF_QUANTILE, df))


def _seed_terms(a_s: np.ndarray, b_s: np.ndarray | None) -> list[tuple[float, float]]:
    """The seed term(s) of se² with their df. Same seed counts: one difference per seed (seed i of both arms saw
    the same data order). Unequal counts: each arm's per-seed variance over its seeds; an arm with one seed
    borrows the per-seed variance of the other (its training noise is there, only not measurable on it)."""
    if b_s is None:
        return [(float(np.var(a_s, ddof=1)) / len(a_s), len(a_s) - 1.0)] if len(a_s) >= 2 else []
    if len(a_s) == len(b_s):
        return [(float(np.var(a_s - b_s, ddof=1)) / len(a_s), len(a_s) - 1.0)] if len(a_s) >= 2 else []
    measured = [x for x in (a_s, b_s) if len(x) >= 2]
    if len(measured) == 2:
        return [(float(np.var(x, ddof=1)) / len(x), len(x) - 1.0) for x in measured]
    (x,) = measured
    per_seed = float(np.var(x, ddof=1))
    return [(per_seed * (1.0 / len(a_s) + 1.0 / len(b_s)), len(x) - 1.0)]


def t_interval(estimate: float, se: float, df: float, level: float) -> tuple[float, float]:
    if se == 0.0:
        return estimate, estimate
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return estimate - half, estimate + half
