"""The one-seed test and interval: Hall's skew-corrected studentized mean, calibrated by sign flips.

Per-unit differences of two arms are often skewed (a few documents gain or lose far more than the rest). A
sign-flip test of their sum assumes each difference is symmetric about 0 under the null; a t test assumes the
studentized mean is t-distributed. Under a skewed null both reject too often, mostly in one direction, and most
at the small levels Holm uses in a large family (centred exponential, n = 20, at 0.05 / 60: the t test rejects
13x too often).

The statistic here is Hall's (1992, "On the removal of skewness by transformation", JRSS B 54) monotone cubic
transform of the studentized mean T = (D - mu) / se,

    G = T + a (2 T^2 + 1) / 6 + a^2 T^3 / 27,    a = (third cumulant of the estimate) / se^3,

which removes the first (skewness) term of T's Edgeworth expansion. Its null distribution is taken from the
same statistic recomputed on the centred unit contributions with random signs (a Rademacher wild bootstrap):
symmetric, like G after the correction, and carrying the sample's own tails and the noise of its estimated a
(so a symmetric heavy-tailed null is not over-corrected). p and the interval come from one reference: the
interval is every mu whose |G(mu)| is within the reference's quantile, so a verdict never contradicts it.

With several training seeds the estimate also carries a seed term (`inference._seed_terms`), estimated on a few
degrees of freedom. The reference then adds to each sign pattern a draw of that term, normal with its variance
at the term's upper confidence bound and its estimate scaled chi-square on its df (`SeedTerms`): with seed noise
dominant the reference is the t distribution on the seeds' df, with unit noise dominant it is the one-seed
reference above, so seeds add power without losing the skew correction.

Chosen by simulation over a plain sign flip of the sum, the t test, Hall's G against t(n - 1) and a sign flip of
G on the raw differences (`tests/report/calibration.py`; the numbers are in `docs/statistics.md`).
`scipy.stats.bootstrap` offers percentile/basic/BCa intervals but neither a studentized bootstrap nor a
p-value, and `permutation_test` flips raw data only, so this is written here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SeedTerms = Sequence[tuple[float, float]]
"""(variance, df) of each seed term of se² as the reference draws it (the variance at its upper bound)."""

_CHUNK_ELEMENTS = 2_000_000
"""Sign patterns are drawn in chunks of about this many entries (memory stays under ~100 MB at any n)."""


def hall(t: np.ndarray | float, a: np.ndarray | float) -> np.ndarray:
    """Hall's monotone transform of a studentized statistic `t` with estimate skewness `a`."""
    t, a = np.asarray(t, dtype=np.float64), np.asarray(a, dtype=np.float64)
    u = a / 3.0
    safe = np.where(np.abs(u) > 1e-12, u, 1.0)
    cubic = ((1.0 + safe * t) ** 3 - 1.0) / (3.0 * safe)
    return np.where(np.abs(u) > 1e-12, cubic, t) + a / 6.0


def hall_inverse(g: np.ndarray | float, a: np.ndarray | float) -> np.ndarray:
    """The `t` with ``hall(t, a) == g`` (the transform is increasing, its inverse closed-form)."""
    g, a = np.asarray(g, dtype=np.float64), np.asarray(a, dtype=np.float64)
    u = a / 3.0
    small = np.abs(u) <= 1e-12
    safe = np.where(small, 1.0, u)
    return np.where(small, g - a / 6.0, (np.cbrt(1.0 + 3.0 * safe * (g - a / 6.0)) - 1.0) / safe)


def moments(x: np.ndarray, indicator: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, se, a) of each row of `x` (k, n) as the estimate of a mean over n units: se² the variance of the
    mean (pooled within strata when `indicator`, the (n, H) unit-to-stratum matrix, is given), a the third
    cumulant of the mean over se³ (a = skewness / sqrt(n) for one stratum)."""
    n = x.shape[1]
    mean = x.mean(axis=1)
    if indicator is None:
        centred = x - mean[:, None]
        var = (centred**2).sum(axis=1) / max(n - 1, 1) / n
    else:
        size = indicator.sum(axis=0)
        centred = x - ((x @ indicator) / np.maximum(size, 1)) @ indicator.T
        within = (centred**2) @ indicator
        var = (within * (size > 1) / np.maximum(size - 1, 1) * size).sum(axis=1) / n**2
    se = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):  # cubed by products: numpy's ** 3 is ~200x slower
        a = np.where(
            se > 0, (centred * centred * centred).sum(axis=1) / n**3 / np.where(se > 0, se, 1.0) ** 3, 0.0
        )
    return mean, se, a


@dataclass(frozen=True)
class SignFlips:
    """The null a test is referred to: centred unit contributions under random signs, per stratum when
    `indicator` (n, H) is given, plus a draw of each seed term (`seeds`, at the variance the reference uses)."""

    centred: np.ndarray
    indicator: np.ndarray | None = None
    seeds: SeedTerms = ()

    def reference(self, rng: np.random.Generator, draws: int, exact_max: int) -> tuple[np.ndarray, bool]:
        """|G| under all 2^n sign patterns when n <= `exact_max` and there is no seed term (exact), else under
        `draws` random ones. Returns (values, exact)."""
        n = len(self.centred)
        if n <= exact_max and not self.seeds:
            signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2.0 - 1.0
            return _abs_g(signs * self.centred, self.indicator), True
        out, chunk = [], max(1, _CHUNK_ELEMENTS // max(n, 1))
        for start in range(0, draws, chunk):
            out.append(self.draw(rng, min(chunk, draws - start)))
        return np.concatenate(out), False

    def sequential_p(
        self, observed: float, rng: np.random.Generator, max_draws: int, stop_hits: int
    ) -> float:
        """Besag and Clifford's (1991) sequential Monte Carlo p: draw sign patterns until `stop_hits` reach
        |G| >= `observed` (p = hits / draws so far) or `max_draws` are spent (p = (1 + hits) / (1 + draws)).
        Valid like the fixed-draws p, and a null test stops after a few dozen draws: what makes simulated
        families of 60 tests at alpha / 60 affordable."""
        n, hits, done, chunk = len(self.centred), 0, 0, 32
        while done < max_draws:
            k = min(chunk, max_draws - done)
            drawn = self.draw(rng, k)
            reached = np.flatnonzero(drawn >= observed - 1e-9 * max(1.0, observed))
            if hits + len(reached) >= stop_hits:
                return stop_hits / (done + int(reached[stop_hits - hits - 1]) + 1)
            hits, done, chunk = hits + len(reached), done + k, min(chunk * 2, _CHUNK_ELEMENTS // max(n, 1))
        return (1 + hits) / (1 + done)

    def draw(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """`k` reference values: random signs on the units, and a normal / scaled chi-square draw per seed
        term."""
        signs = rng.integers(0, 2, size=(k, len(self.centred)), dtype=np.int8) * 2.0 - 1.0
        shift, var = np.zeros(k), np.zeros(k)
        for v, df in self.seeds:
            shift += math.sqrt(v) * rng.standard_normal(k)
            var += v * rng.chisquare(df, k) / df
        return _abs_g(signs * self.centred, self.indicator, shift, var)


def _abs_g(
    x: np.ndarray,
    indicator: np.ndarray | None,
    shift: np.ndarray | float = 0.0,
    seed_var: np.ndarray | float = 0.0,
) -> np.ndarray:
    """|G| of each row of `x` as unit contributions, plus a seed term's estimate `shift` and variance `seed_var`
    (the skewness is the units' third cumulant over the whole se³: seed noise is taken as symmetric)."""
    mean, se_u, a_u = moments(x, indicator)
    se = np.sqrt(se_u**2 + seed_var)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, (mean + shift) / np.where(se > 0, se, 1.0), 0.0)
        a = np.where(se > 0, a_u * (se_u / np.where(se > 0, se, 1.0)) ** 3, 0.0)
    return np.abs(hall(t, a))


def p_and_interval(
    estimate: float, se: float, a: float, ref: np.ndarray, level: float
) -> tuple[float, float, float]:
    """(p of "the difference is 0", low, high) from the observed estimate, its se and skewness `a`, and the
    reference |G| values. p is (1 + hits) / (1 + size of the reference) even when every pattern is enumerated:
    the observed sample is not centred, so it is not one of the reference's patterns (the add-one rule keeps p
    above 0). The interval holds every mu with |G(mu)| at most the reference quantile that p is compared with,
    so ``p <= 1 - level`` exactly when the interval excludes 0."""
    observed = abs(float(hall(estimate / se, a)))
    hits = int((ref >= observed - 1e-9 * max(1.0, observed)).sum())
    p = (1 + hits) / (1 + len(ref))
    allowed = math.floor((1.0 - level) * (1 + len(ref)) + 1e-9) - 1
    if not 0 <= allowed < len(ref):
        return p, -math.inf, math.inf
    q = float(np.sort(ref)[::-1][allowed])
    return p, estimate - se * float(hall_inverse(q, a)), estimate - se * float(hall_inverse(-q, a))
