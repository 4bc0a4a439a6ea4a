"""The printed MDE against the report's own test: power at it on normal and on skewed units.

The MDE is the larger of its two directions (`inference.mde_directions`), each read from the skew-corrected
test's rejection rule with the sample's own skewness. Power is simulated through `inference.compare` at the
median MDE the report prints on such samples, the true difference on each side of 0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlab.report.stats import inference as inf

N, ALPHA, SIMS = 32, 0.05 / 4, 300
TOL = 3 * math.sqrt(0.8 * 0.2 / SIMS)
"""Three Monte Carlo SEs of a power of 80% over `SIMS` experiments (6.9 points)."""


def _draw(kind: str, rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.standard_normal(size) if kind == "normal" else rng.exponential(1.0, size) - 1.0


def _printed_mde(kind: str, rng: np.random.Generator) -> float:
    """The median MDE the report prints on samples of this kind (a plan quotes the typical one)."""
    out = []
    for _ in range(200):
        c = inf.compare(_draw(kind, rng, N), np.zeros(N), draws=200, rng=rng)
        out.append(c.mde(ALPHA))
    return float(np.median(out))


def _power(kind: str, shift: float, rng: np.random.Generator) -> float:
    """Share of experiments with true difference `shift` the report's test calls significant on its side."""
    hits = 0
    for _ in range(SIMS):
        c = inf.compare(_draw(kind, rng, N) + shift, np.zeros(N), draws=1000, rng=rng)
        hits += bool(c.p_value is not None and c.p_value <= ALPHA and np.sign(c.estimate) == np.sign(shift))
    return hits / SIMS


def test_mde_directions_reduce_to_the_t_formula_without_skew():
    se, df = 0.1, 30.0
    t = (inf.stats.t.ppf(1 - ALPHA / 2, df) + inf.stats.t.ppf(0.8, df)) * se
    assert inf.mde_directions(se, df, ALPHA, 0.8, 0.0) == pytest.approx((t, t))
    down, up = inf.mde_directions(
        se, df, ALPHA, 0.8, 0.3
    )  # right-skewed units: the lower side is the hard one
    assert down > t > up and inf.mde(se, df, ALPHA, 0.8, 0.3) == down


def test_power_at_the_printed_mde_is_80_percent_on_normal_units():
    rng = np.random.default_rng(11)
    mde = _printed_mde("normal", rng)
    for side in (-1.0, 1.0):
        assert abs(_power("normal", side * mde, rng) - 0.8) <= TOL


def test_on_skewed_units_the_printed_mde_covers_the_hard_side_better_than_the_t_formula():
    """Centred exponential units: the long tail's side is found with certainty, the other is the hard one; the
    MDE quotes the hard side, so its power there is well above the t formula's (measured 53-59% against
    21-44%; 80% would need the population's skewness, which a sample of 32 underestimates, docs/statistics.md)."""
    rng = np.random.default_rng(12)
    mde = _printed_mde("exp", rng)
    t_formula = inf.mde(1.0 / math.sqrt(N), N - 1.0, ALPHA)
    assert mde > t_formula
    assert _power("exp", mde, rng) >= 0.8 - TOL  # the long tail's side
    hard = _power("exp", -mde, rng)
    assert hard > _power("exp", -t_formula, rng) + TOL
