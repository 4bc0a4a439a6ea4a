"""Paired small-sample inference behind every verdict: skew-corrected tests and intervals, seeds, families, MDE.

A verdict compares two arms on the **same independent units** (documents for BPB, examples stratified by task for
CORE, keys for passkey, records for copy). Each arm gives per-unit values ``y[s, c]`` for training seeds ``s`` and
units ``c``; seed ``s``'s estimate is the ratio of sums ``sum_c y[s, c] / sum_c w[c]`` over weights ``w`` that both
arms share (bytes for BPB, 1 for a plain mean). The arm's estimate is the mean over its seeds.

* **se²** is the sum of
  - a *unit term*: the variance of the linearised unit contributions ``z_c = (d_c - D w_c) / mean(w)`` of the
    seed-averaged difference, over n (within strata when `strata` is given: CORE tasks), n - 1 df;
  - a *seed term* (several seeds): the variance of the per-seed differences over S, S - 1 df (seed i of both
    arms saw the same data order). Unequal seed counts: each arm's per-seed variance over its seeds; an arm
    with one seed borrows the other arm's per-seed variance (`rlab.report.stats.variance`). One seed on both
    sides: no seed term, and the verdict says training noise is not covered (`Comparison.training_noise_covered`).
* **One seed per side** (`compare`): p and the 95% interval come from one procedure, `rlab.report.stats.skew_test`:
  Hall's skew-corrected studentized mean, referred to its own distribution under random signs of the centred
  contributions (all 2^n patterns up to `EXACT_SIGN_FLIP_MAX` units, else `draws` seeded draws). The plain
  sign-flip test of ``sum(d)`` it replaces assumed symmetric differences and gave 8% familywise error on the
  demo's own (skewed) differences, 19-37% on centred-exponential families of 10-60 (the calibration table is in
  `docs/statistics.md`).
* **Several seeds**: the same skew-corrected statistic on the whole se, its reference adding to each sign pattern
  a draw of the seed terms (at their 90% upper bound, `skew_test`): t on the seeds' df when seed noise
  dominates, the one-seed reference when unit noise does, so seeds add power and keep the skew correction. `df`
  (Welch-Satterthwaite's over the terms) is kept for the MDE and for `level`'s t intervals.
* **Untestable**: fewer than `MIN_UNITS` units, or no variation (every unit differs by the same amount: identical
  arms, structural zeros): the p-value is None, the comparison enters no family and gets no verdict.
* **Families** (`rlab.report.stats.verdicts`): verdicts are Holm-adjusted within one declared family whose size
  counts only testable comparisons (statsmodels' `multipletests` gives the same numbers; this one keeps the
  None entries out of the count).
* **MDE** (`Comparison.mde`, `rlab.report.stats.mde`): the smallest true difference the test finds with 80% power
  at a given level in either direction, from the skew-corrected test's own rejection rule simulated under a gamma
  population fitted to the comparison (one seed a side), else in closed form (the t formula
  ``(t(1 - alpha/2, df) + t(power, df)) · se`` when the units are symmetric); printed beside every "within noise",
  labelled "seed MDE" where its seeds set it (`Comparison.seed_limited`). `planned_se` gives the
  se (and df) of a planned experiment from per-unit and per-seed SDs, for `rlab.report.power.planner`.

Nothing here reads files or frames: callers pass arrays (`rlab.report.stats.estimates`, `rlab.report.copy_distance.section`).
`tests/report/calibration.py` checks false positives and coverage on symmetric, skewed, heavy-tailed, unequal-length,
seed, correlated-family and plasmode nulls through these functions; `rlab.report.stats.plasmode` runs the last on an
experiment's own units (`rlab report --calibrate`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from rlab.report.stats import skew_test
from rlab.report.stats.mde import mde
from rlab.report.stats.variance import satterthwaite, se_terms, t_interval, upper_factor

MIN_UNITS = 20
"""Fewer independent units than this: no p-value and no verdict (a t interval on so few is fragile)."""
MIN_SEEDS = 2
"""Seeds per arm a verdict needs before it covers training noise (one seed estimates no seed variance)."""
ALPHA = 0.05
"""Familywise error rate of every family of verdicts."""
LEVEL = 0.95
"""Coverage of every printed (unadjusted) interval."""
POWER = 0.80
"""Power at which the minimum detectable effect is quoted."""
SIGN_FLIP_DRAWS = 20_000
"""Monte Carlo draws of a sign-flip test: resolves p down to 5e-5, below alpha / m of any family here."""
EXACT_SIGN_FLIP_MAX = 16
"""Up to this many units the sign-flip test enumerates all 2^n sign patterns (exact p)."""
SKEW_EXACT = "skew-corrected t, sign-flip reference (exact)"
SKEW_MC = "skew-corrected t, sign-flip reference (Monte Carlo)"
SEEDS_SKEW = "skew-corrected t over seeds and units, sign flips and seed-term draws (Monte Carlo)"
_NO_VARIATION = 1e-12
"""A standard error this small relative to the values is rounding: the arms are identical on these units."""


@dataclass(frozen=True)
class Comparison:
    """An estimate with its studentized interval, its test, and what it rests on."""

    estimate: float
    low: float
    high: float
    se: float
    df: float
    p_value: float | None
    """Two-sided p of "the true difference is 0"; None where untestable (and for a level, which is no test)."""
    n_units: int
    """Independent units (documents, examples, keys, records) behind the estimate."""
    n_seeds: int = 1
    """Training seeds per side (the smaller side); 1 = training noise not covered."""
    method: str = "t"
    """How `p_value` was computed: `SKEW_EXACT`, `SKEW_MC` (one seed per side) or `SEEDS_SKEW` (several)."""
    reason: str | None = None
    """Why there is no p-value: ``too few units`` or ``no variation``."""
    unit_var: float = math.nan
    """The unit term of se² (unit noise of the estimate); times `n_units`, the per-unit variance a plan scales."""
    seed_var: float = math.nan
    """The seed term of se² (0 with one seed); times `n_seeds`, the per-seed variance a plan scales."""
    skew: float = 0.0
    """Hall's `a` of the estimate: the units' third cumulant of it over se³ (0 for symmetric units)."""
    seed_df: float = math.nan
    """Degrees of freedom of the seed term (S - 1; Satterthwaite's over two arms' terms; NaN without one)."""

    @property
    def testable(self) -> bool:
        return self.p_value is not None

    @property
    def training_noise_covered(self) -> bool:
        return self.n_seeds >= MIN_SEEDS

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0

    def mde(self, alpha: float = ALPHA, power: float = POWER) -> float:
        """Smallest true |difference| the test at `alpha` finds with probability `power` in either direction
        (NaN if no se): `mde` with this comparison's skewness (simulated over its units when it has no seed
        term)."""
        units = None if self.seed_var > 0 else self.n_units
        return mde(self.se, self.df, alpha, power, self.skew, units)

    def seed_limited(self, alpha: float = ALPHA, power: float = POWER) -> bool:
        """Whether its seeds, not its units, set the MDE: the seed term alone (unlimited units at these seeds,
        `seed_floor`) gives a larger MDE than the units alone give, so no number of units brings the MDE down to
        what the units support, and only more seeds can (`rlab power` says how many resolve a stated effect)."""
        if not (self.seed_var > 0 and self.unit_var > 0):  # no seed term (one seed a side), or no unit term
            return False
        unit_se = math.sqrt(self.unit_var)
        unit_skew = self.skew * (self.se / unit_se) ** 3  # the units' a over their own se
        units_only = mde(unit_se, max(self.n_units - 1.0, 1.0), alpha, power, unit_skew, self.n_units)
        return seed_floor(self.seed_var, self.seed_df, alpha, power) > units_only


def seed_floor(seed_var: float, df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDE with unlimited units: the seed term `seed_var` of se² alone, t on its `df` (S - 1 for S seeds; 0
    without a seed term). `rlab.report.power.planner` plans with the same floor."""
    if not (seed_var > 0 and df > 0):
        return 0.0
    return mde(math.sqrt(seed_var), df, alpha, power)


def planned_se(
    unit_sd: float, n_units: int, seed_sd: float | None = None, n_seeds: int = 1
) -> tuple[float, float]:
    """(se, df) that `compare` would give for a difference with per-unit SD `unit_sd` over `n_units` units and,
    with several seeds, per-seed SD `seed_sd` of the seed-level differences over `n_seeds` seeds.

    The same two terms as `compare`'s: se² = unit_sd² / n + seed_sd² / S, df Welch-Satterthwaite's over them
    with the seed term at its upper bound, as `compare` takes them (n - 1 with one seed). The unit term is taken not to shrink with seeds (conservative: unit heterogeneity of
    the effect stays when seeds are averaged)."""
    unit = (unit_sd**2 / n_units, max(n_units - 1.0, 1.0))
    if n_seeds < MIN_SEEDS:
        return satterthwaite([unit], unit[1])
    seed = ((seed_sd or 0.0) ** 2 / n_seeds, n_seeds - 1.0)
    se, _ = satterthwaite([unit, seed], unit[1])
    _, df = satterthwaite(
        [unit, (seed[0] * upper_factor(seed[1]), seed[1])], unit[1]
    )  # as `se_terms` takes them
    return se, df


def rng_for(seed: int, key: str) -> np.random.Generator:
    """A generator that depends only on `seed` and a stable label (not on call order)."""
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def as_seeds(x: np.ndarray | Sequence[float]) -> np.ndarray:
    """(n,) -> (1, n); (S, n) unchanged; float64."""
    arr = np.asarray(x, dtype=np.float64)
    return arr[None, :] if arr.ndim == 1 else arr


def cluster_sums(values: np.ndarray, clusters: Sequence | np.ndarray | None) -> np.ndarray:
    """Sum per-unit values (S, n) within clusters -> (S, C), clusters in sorted-id order (None: unchanged)."""
    values = as_seeds(values)
    if clusters is None:
        return values
    _, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    out = np.zeros((values.shape[0], int(inverse.max()) + 1 if len(inverse) else 0))
    np.add.at(out.T, inverse.ravel(), values.T)
    return out


# ---------------------------------------------------------------- the two entry points


def compare(
    a: np.ndarray,
    b: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    strata: np.ndarray | Sequence | None = None,
    rng: np.random.Generator | None = None,
    draws: int = SIGN_FLIP_DRAWS,
    level: float = LEVEL,
    min_units: int = MIN_UNITS,
    stop_hits: int | None = None,
) -> Comparison:
    """Arm a minus arm b on the same units: estimate, studentized interval, test, units, seeds.

    `a`, `b`: per-unit values, (n,) or (S, n) for S seeds, aligned by unit (the caller joins on unit id and sums
    within clusters first: the units must be independent). Each seed's estimate is ``sum(y) / sum(weights)``
    (`weights` None: a mean). `strata`: a label per unit; the unit variance is then pooled within strata
    (CORE: the task), as a stratified sample's is. p and the interval: the skew-corrected test (`skew_test`).
    """
    ya, yb = as_seeds(a), as_seeds(b)
    n = ya.shape[1]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if yb.shape[1] != n or len(w) != n:
        raise ValueError(f"compare: units do not align ({n}, {yb.shape[1]}, {len(w)})")
    if n == 0 or not w.sum() > 0:
        return Comparison(math.nan, math.nan, math.nan, math.nan, math.nan, None, n, reason="no units")
    strata_arr = None if strata is None else np.asarray(strata)
    estimate, se, df, seeds, unit_var, seed_terms, z = se_terms(ya, yb, w, strata_arr)
    seed_var = sum(v for v, _ in seed_terms)
    low, high = t_interval(estimate, se, df, level) if n >= 2 or seeds >= 2 else (math.nan, math.nan)
    seed_df = satterthwaite(seed_terms, math.nan)[1] if seed_terms else math.nan
    base = dict(
        estimate=estimate,
        low=low,
        high=high,
        se=se,
        df=df,
        n_units=n,
        n_seeds=seeds,
        unit_var=unit_var,
        seed_var=seed_var,
        seed_df=seed_df,
    )
    if n < min_units:
        return Comparison(**base, p_value=None, reason="too few units")
    if se <= _NO_VARIATION * max(1.0, float(np.abs(ya).max()), float(np.abs(yb).max())) / w.mean():
        return Comparison(**base, p_value=None, reason="no variation")
    indicator = None if strata_arr is None else _indicator(strata_arr)
    _, se_u, a_u = skew_test.moments(z[None, :], indicator)
    skew = float(a_u[0] * (se_u[0] / se) ** 3)  # the units' third cumulant over the whole se³
    centred = z - _stratum_means(z, indicator)
    drawn = [(v * upper_factor(d), d) for v, d in seed_terms]  # the reference draws them at their upper bound
    null, rng = skew_test.SignFlips(centred, indicator, drawn), rng or np.random.default_rng(0)
    if stop_hits is not None:  # simulations: the p only, drawn sequentially (the interval is not computed)
        observed = abs(float(skew_test.hall(estimate / se, skew)))
        p = null.sequential_p(observed, rng, draws, stop_hits)
        method = SEEDS_SKEW if seed_terms else SKEW_MC
        return Comparison(**base | dict(low=math.nan, high=math.nan, skew=skew), p_value=p, method=method)
    ref, exact = null.reference(rng, draws, EXACT_SIGN_FLIP_MAX)
    p, low, high = skew_test.p_and_interval(estimate, se, skew, ref, level)
    base.update(low=low, high=high, skew=skew)
    if not seed_terms and (recorded := _RECORDED.get()) is not None:
        recorded.append(UnitContributions(estimate, n, z, strata_arr))
    method = SEEDS_SKEW if seed_terms else SKEW_EXACT if exact else SKEW_MC
    return Comparison(**base, p_value=p, method=method)


@dataclass(frozen=True)
class UnitContributions:
    """What a one-seed test rested on: its estimate, units, centred per-unit contributions and strata (the
    input of a plasmode null, `rlab.report.stats.plasmode`)."""

    estimate: float
    n_units: int
    z: np.ndarray
    strata: np.ndarray | None


_RECORDED: ContextVar[list[UnitContributions] | None] = ContextVar("_RECORDED", default=None)


@contextmanager
def recording_units() -> Iterator[list[UnitContributions]]:
    """Collect the `UnitContributions` of every one-seed test run inside (`rlab report --calibrate`)."""
    out: list[UnitContributions] = []
    token = _RECORDED.set(out)
    try:
        yield out
    finally:
        _RECORDED.reset(token)


def _indicator(strata: np.ndarray) -> np.ndarray:
    """(n, H) 0/1 matrix: unit i is in stratum h."""
    _, inverse = np.unique(strata, return_inverse=True)
    return np.eye(int(inverse.max()) + 1)[inverse.ravel()]


def _stratum_means(z: np.ndarray, indicator: np.ndarray | None) -> np.ndarray | float:
    if indicator is None:
        return float(z.mean())
    return ((z @ indicator) / np.maximum(indicator.sum(axis=0), 1)) @ indicator.T


def level(
    y: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    strata: np.ndarray | Sequence | None = None,
    level: float = LEVEL,
) -> Comparison | None:
    """One arm's estimate (mean over seeds of ``sum(y) / sum(weights)``) with its studentized interval; no test.

    None when there are no units. The interval carries unit noise, and seed noise when there are several seeds."""
    ys = as_seeds(y)
    n = ys.shape[1]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if n == 0 or not w.sum() > 0:
        return None
    estimate, se, df, seeds, unit_var, seed_terms, _ = se_terms(
        ys, None, w, None if strata is None else np.asarray(strata)
    )
    seed_var = sum(v for v, _ in seed_terms)
    low, high = t_interval(estimate, se, df, level) if n >= 2 or seeds >= 2 else (math.nan, math.nan)
    return Comparison(
        estimate, low, high, se, df, None, n, seeds, "t", "a level, not a test", unit_var, seed_var
    )


def ratio_values(nats: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BPB as `compare`/`level` inputs: per-unit values nats / ln 2 and weights bytes (the same for every arm)."""
    nb = as_seeds(nbytes)
    return as_seeds(nats) / math.log(2.0), nb[0]


def relative(c: Comparison, baseline: float) -> tuple[float, float, float] | None:
    """The difference in percent of the baseline's value (estimate, low, high); None unless the baseline is > 0.

    The baseline's own uncertainty is left out: it moves the percentage by a relative amount of the order of
    its relative standard error (a few percent of the percentage), far less than the difference's own."""
    if not baseline > 0 or math.isnan(c.estimate):
        return None
    return tuple(100.0 * v / baseline for v in (c.estimate, c.low, c.high))  # type: ignore[return-value]


def test_description(draws: int, seed: int) -> str:
    """How every p-value and interval of a comparison is computed, in one sentence for the methods text."""
    return (
        "p-value and 95% interval come from one test: the studentized mean difference with Hall's skewness "
        f"correction, referred to its own distribution under random signs of the centred per-unit differences "
        f"(every pattern up to {EXACT_SIGN_FLIP_MAX} units, else {draws} Monte Carlo draws, seed {seed}), valid for "
        "skewed and heavy-tailed units; with several training seeds per arm the reference adds a draw of the seed "
        "term (normal, its variance at its 90% upper bound, chi-square on its degrees of freedom; an arm with one "
        "seed borrows the other's seed term)"
    )
