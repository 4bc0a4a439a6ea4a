"""The minimum detectable effect of the report's test: its own rejection rule, simulated under a fitted population.

The skew-corrected test (`skew_test`) rejects downwards when Hall's G(D / se, a) falls below -q, i.e. when the
estimate D < se · G⁻¹(-q, a), with se, a and the sign-flip reference (so q) all unchanged by a shift of every unit.
So a true difference -mu is found exactly when mu >= W = D₀ - se · G⁻¹(-q, a), D₀ the estimate under the null,
and the shift found with 80% power is W's 80% quantile over samples (upwards likewise). That quantile is
simulated here (`SIM_DRAWS` samples of the comparison's n units) under a population fitted to the comparison:

* **shape**: a lognormal population whose skewness is median-unbiased for the observed one: the skewness at
  which samples of n units show the observed |skewness| in the median (`population_skew`). A sample of 20-64
  units underestimates a skewed population's skewness (centred exponential, skewness 2, n = 20: median sample
  skewness 1.1), and the hard side's MDE is steep in it. A lognormal, not a gamma: its tail is heavier at the
  same skewness, so the gamma fitted to lognormal units fell short (72-77% on the hard side) while the lognormal
  fitted to exponential units overshoots little. Samples less skewed than `NORMAL_QUANTILE` of a normal
  population's are fitted a normal one, so the MDE printed in the median over a normal population's samples is
  the normal's (with the cut at a normal's median |skewness|, half of its samples were fitted a skewed population
  and the median MDE overshot: 82-90% power);
* **scale**: the observed se over the median that samples of that population give it (a skewed sample's SD is
  low in the median too); for the normal fit also over how far the median MDE printed on a normal population's
  own samples lands above the normal fit's (`_normal_median_shift`: its samples above the cut print larger MDEs;
  4% at 20 units, 1% at 64), so that median is the normal fit's (normal units had 82-85% power without it);
* **q**: the t quantile on n - 1 df, scaled by 1 + `Q_SKEW_SLOPE` · z · |sample skewness|, z the normal
  quantile of the level: the sign-flip reference of G is wider than t on skewed samples, the more so the
  smaller the level (fitted to 1,000 samples a cell, normal to lognormal, n 20-64, alpha 0.05/4 and 0.05/60,
  20,000 draws each).

The closed form it replaces (`closed_form`: Hall's transform inverted at the sample skewness, the test's
reference taken as symmetric under a shift) gave 40-54% power on the hard side of centred exponential and
lognormal units. Power at the printed MDE with this rule: normal 77-83%, t3 77-82%, exponential 79-85% and
lognormal 77-79% on the hard side (100% on the long tail's), n 20-64, alpha/4 and alpha/60, Monte Carlo SE 1.3
points (`tests/report/mde_grid.py`, table in docs/statistics.md). What splits exponential from lognormal units is
left: given the sample skewness their samples show about the same kurtosis (docs/statistics.md). It is used for
one-seed comparisons up to `SIM_MAX_UNITS` units (above, the skewness per unit of the mean is small and the closed
form is used); with a seed term the test's reference is t on the seeds' df and the closed form applies.

Deterministic (fixed seeds; cached per simulated size, skewness and level): the demo's report spends about two
seconds on its MDEs (half of it the normal fit's step, which simulates the fits of a normal population's samples
once per size and level), `rlab power -e demo` about as long as before.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, stats

from rlab.report.stats import skew_test

SIM_DRAWS = 2000
"""Simulated null samples per MDE (the 80% quantile of W to about ±2 points of power)."""
SKEW_DRAWS = 400
"""Samples per grid point of the median-|skewness| curve (`population_skew`)."""
SIM_MAX_UNITS = 256
"""Above this many units the closed form is used (a = skewness / √n is small there)."""
Q_SKEW_SLOPE = 0.025
"""The sign-flip reference's quantile over t's grows by about this much per unit of |sample skewness| and of
the normal quantile of the level (the wider the tail quantile, the more skewness widens it)."""
NORMAL_QUANTILE = 0.85
"""Samples whose |skewness| is below this quantile of a normal population's are fitted a normal population."""
SKEW_GRID = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.5, 8.0])
"""Population skewnesses the median-|skewness| curve is drawn at."""
_SKEW_STEP = 0.1
"""The fitted skewness is rounded to this (shares simulations between comparisons)."""


def mde(
    se: float, df: float, alpha: float, power: float, skew: float = 0.0, n_units: int | None = None
) -> float:
    """The minimum detectable effect of the report's test: the larger of `mde_directions` (NaN without an se).

    "Within noise" reads as "no effect this large either way"; the direction of a within-noise estimate is itself
    noise, so an MDE in the direction the estimate points would quote the small side half the time for an effect
    on the other. The report prints it beside "within noise"; `rlab.report.power.planner` plans with it, so a plan
    and the report it leads to agree."""
    return max(mde_directions(se, df, alpha, power, skew, n_units))


def mde_directions(
    se: float,
    df: float,
    alpha: float,
    power: float,
    skew: float = 0.0,
    n_units: int | None = None,
) -> tuple[float, float]:
    """(MDE below 0, MDE above 0) of the skew-corrected test as magnitudes; `skew` is Hall's a of the estimate.

    With `n_units` (a one-seed comparison of up to `SIM_MAX_UNITS` units) simulated under the fitted lognormal
    population (module docstring); otherwise `closed_form`."""
    if not (se > 0 and df > 0) or math.isnan(se):
        return math.nan, math.nan
    if n_units is None or n_units > SIM_MAX_UNITS or n_units < 3:
        return closed_form(se, df, alpha, power, skew)
    n = _simulated_units(n_units)
    g = float(population_skew(n, abs(skew) * math.sqrt(n_units)))
    hard, easy = _simulated(n, g, alpha, power)
    if g == 0.0:
        se /= _normal_median_shift(n, alpha, power)
    return (hard * se, easy * se) if skew >= 0 else (easy * se, hard * se)


def closed_form(se: float, df: float, alpha: float, power: float, skew: float = 0.0) -> tuple[float, float]:
    """(down, up) from Hall's transform inverted at `skew`, taking G of the studentized error under a shift to be
    distributed as the (symmetric) reference: se (G⁻¹(c) - G⁻¹(-q)) down and se (G⁻¹(q) - G⁻¹(-c)) up, q and c
    the t quantiles on `df` at 1 - alpha/2 and `power`; with a = 0 the t formula (t(1 - alpha/2) + t(power)) se."""
    q, c = _t_quantile(1 - alpha / 2, df), _t_quantile(power, df)
    g = skew_test.hall_inverse
    return float(g(c, skew) - g(-q, skew)) * se, float(g(q, skew) - g(-c, skew)) * se


@functools.lru_cache(maxsize=8192)
def _t_quantile(p: float, df: float) -> float:
    """`scipy.stats.t.ppf`, cached: a plan's search asks the same few levels and df many times."""
    return float(stats.t.ppf(p, df))


def population_skew(n: int, sample_skew: np.ndarray | float) -> np.ndarray:
    """The lognormal population's skewness at which samples of `n` units show |skewness| `sample_skew` in the
    median; 0 up to the |skewness| that `NORMAL_QUANTILE` of a normal population's samples show, then rising
    linearly to the median curve (so most normal samples are fitted a normal population). Rounded to
    `_SKEW_STEP`, which shares simulations between comparisons; one value per element of `sample_skew`."""
    curve, floor = _abs_skew_curve(n)
    above = curve > floor
    points = np.concatenate([[floor], curve[above]])
    fitted = np.interp(sample_skew, points, np.concatenate([[0.0], SKEW_GRID[above]]))
    return np.round(np.asarray(fitted) / _SKEW_STEP) * _SKEW_STEP


@functools.lru_cache(maxsize=1024)
def _normal_median_shift(n: int, alpha: float, power: float) -> float:
    """How far above the normal fit's MDE the median MDE printed on a normal population's own samples lands.

    Samples of a normal population more skewed than `NORMAL_QUANTILE` of them are fitted skewed populations and
    printed larger MDEs, so the median printed MDE over its samples sits above the normal fit's (by 4% at 20 units,
    1% at 64). The normal fit's MDE is divided by this ratio, so that median is the normal fit's own; a skewed
    population's fits scatter on both sides of it and need no such step."""
    _, se, a = _null_samples(n, 0.0)
    fitted = population_skew(n, np.abs(a) * math.sqrt(n))
    each = {g: max(_simulated(n, float(g), alpha, power)) for g in np.unique(fitted)}
    printed = np.array([each[g] for g in fitted]) * se
    return float(np.median(printed) / (max(_simulated(n, 0.0, alpha, power)) * np.median(se)))


def _population_units(skew: float, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Draws of a lognormal population standardised to mean 0, SD 1 with this skewness (normal at 0)."""
    if skew < 1e-6:
        return rng.standard_normal(shape)
    w = _lognormal_w(skew)  # exp(sigma²): the lognormal's mean is √w, its variance w (w - 1)
    x = np.exp(math.sqrt(math.log(w)) * rng.standard_normal(shape))
    return (x - math.sqrt(w)) / math.sqrt(w * (w - 1))


@functools.lru_cache(maxsize=256)
def _lognormal_w(skew: float) -> float:
    """exp(sigma²) of the lognormal with this skewness, (w + 2) √(w - 1)."""
    return float(optimize.brentq(lambda w: (w + 2) * math.sqrt(w - 1) - skew, 1.0, 100.0))


@functools.lru_cache(maxsize=512)
def _abs_skew_curve(n: int) -> tuple[np.ndarray, float]:
    """Median |sample skewness| of samples of n units at each `SKEW_GRID` skewness (made non-decreasing), and
    the `NORMAL_QUANTILE` quantile of a normal population's."""
    rng = np.random.default_rng([n, 37])
    median, floor = [], 0.0
    for g in SKEW_GRID:
        _, _, a = skew_test.moments(_population_units(float(g), (SKEW_DRAWS, n), rng), None)
        s = np.abs(a) * math.sqrt(n)
        median.append(float(np.median(s)))
        if g == 0.0:
            floor = float(np.quantile(s, NORMAL_QUANTILE))
    return np.maximum.accumulate(np.array(median)), floor


def _simulated_units(n: int) -> int:
    """The size simulated for `n` units: itself up to 32, else the nearest of a grid 9% apart (the MDE in se
    units changes little between them; it keeps the simulations a report and a plan's search need few)."""
    return n if n <= 32 else round(2 ** (round(8 * math.log2(n)) / 8))


@functools.lru_cache(maxsize=1024)
def _null_samples(n: int, skew: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, se, a) of `SIM_DRAWS` samples of n units from the standardised lognormal of this skewness."""
    return skew_test.moments(_population_units(skew, (SIM_DRAWS, n), np.random.default_rng([n, 73])), None)


@functools.lru_cache(maxsize=4096)
def _simulated(n: int, skew: float, alpha: float, power: float) -> tuple[float, float]:
    """(hard side, long tail's side) MDE in se units under the standardised lognormal population of this skewness
    (right-skewed: the hard side is below 0): W's `power` quantile over the median se samples give."""
    mean, se, a = _null_samples(n, skew)
    z = float(stats.norm.ppf(1 - alpha / 2))
    q = _t_quantile(1 - alpha / 2, n - 1.0) * (1.0 + Q_SKEW_SLOPE * z * np.abs(a) * math.sqrt(n))
    down = mean - se * skew_test.hall_inverse(-q, a)
    up = se * skew_test.hall_inverse(q, a) - mean
    typical_se = float(np.median(se))
    return float(np.quantile(down, power)) / typical_se, float(np.quantile(up, power)) / typical_se
