"""The paired inference API: t intervals, sign-flip p-values, the seed term, Holm families, MDE, verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd
from rlab.report.stats.variance import SEED_DF_QUANTILE
from rlab.report.stats.verdicts import Verdict


def test_one_seed_test_is_near_the_paired_t_test_on_symmetric_units():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 1.0, 30), rng.normal(0.8, 1.0, 30)
    c = inf.compare(a, b)
    ref = stats.ttest_rel(a, b)
    d = a - b
    half = stats.t.ppf(0.975, 29) * d.std(ddof=1) / math.sqrt(30)
    assert c.estimate == pytest.approx(d.mean()) and c.df == 29 and c.method == inf.SKEW_MC
    assert (c.low, c.high) == pytest.approx((d.mean() - half, d.mean() + half), rel=0.15)
    assert c.p_value == pytest.approx(ref.pvalue, abs=0.03)


def test_p_and_interval_come_from_one_procedure():
    """p <= 1 - level exactly when the interval at that level excludes 0, and the interval leans with the skew."""
    rng = np.random.default_rng(4)
    d = rng.exponential(1.0, 40) - 0.6
    first = inf.compare(d, np.zeros(40), rng=inf.rng_for(0, "x"))
    for level in (1 - first.p_value * 0.98, 1 - first.p_value * 1.02):
        c = inf.compare(d, np.zeros(40), rng=inf.rng_for(0, "x"), level=level)
        assert (c.p_value <= 1 - level) == c.excludes_zero()
    assert first.high - first.estimate > first.estimate - first.low  # right-skewed units: longer upper arm


def test_sign_flips_are_exact_on_few_units():
    d = np.array([1.0, 2.0, 3.0, 4.0] * 4)
    c = inf.compare(d, np.zeros(16), min_units=4)
    assert c.method == inf.SKEW_EXACT and c.p_value == pytest.approx(1 / (1 + 2**16))


def test_holm_and_families_count_only_testable_comparisons():
    adj = vd.holm([0.01, 0.04, None, 0.03, math.nan, 0.2])
    assert adj[0] == pytest.approx(0.04) and adj[3] == pytest.approx(0.09) and adj[1] == pytest.approx(0.09)
    assert adj[5] == pytest.approx(0.2) and adj[2] is None and adj[4] is None
    rng = np.random.default_rng(1)
    real = inf.compare(rng.normal(1, 0.2, 30), np.zeros(30))
    few = inf.compare(rng.normal(1, 0.2, 5), np.zeros(5))
    same = inf.compare(np.ones(30), np.ones(30))
    family, p, verdicts = vd.decide_family("t", [real, few, same, None], [False] * 4)
    assert family.size == 1 and family.describe() == "t family: 1 comparison, Holm, familywise error 5%"
    assert verdicts == [Verdict.BETTER, Verdict.TOO_FEW_UNITS, Verdict.UNTESTABLE, Verdict.NONE]
    assert p[1] is None and p[2] is None


def test_a_verdict_never_contradicts_its_interval():
    c = inf.Comparison(0.1, -0.01, 0.2, 0.05, 30, 0.001, 40)
    assert vd.decide(c, 0.01, lower_is_better=False) == Verdict.WITHIN_NOISE


def test_mde_is_the_80_percent_power_distance():
    """A true difference of one MDE is found about 80% of the time at the MDE's level."""
    rng = np.random.default_rng(2)
    pilot = inf.compare(rng.normal(0, 1, 40), np.zeros(40))
    mde = inf.Comparison(0, 0, 0, 1 / math.sqrt(40), 39, 1.0, 40).mde(0.05)
    hits = 0
    for _ in range(400):
        x = rng.normal(mde, 1, 40)
        hits += stats.ttest_1samp(x, 0).pvalue <= 0.05
    assert 0.72 < hits / 400 < 0.88
    assert pilot.mde(0.05 / 10) > pilot.mde(0.05)  # a stricter family level asks for a larger effect


def test_seed_and_unit_terms_use_satterthwaite_degrees_of_freedom():
    rng = np.random.default_rng(3)
    a = rng.normal(0, 1, (3, 50)) + rng.normal(0, 0.5, (3, 1))
    b = rng.normal(0, 1, (3, 50))
    c = inf.compare(a, b)
    u, s = c.unit_var, c.seed_var * 2 / stats.chi2.ppf(SEED_DF_QUANTILE, 2)  # the seed term's upper bound
    assert c.df == pytest.approx((u + s) ** 2 / (u**2 / 49 + s**2 / 2)) and c.n_seeds == 3
    # the skew-corrected reference with the seed term drawn: between t on the Satterthwaite df and t on S - 1
    t_df, t_seeds = (2 * stats.t.sf(abs(c.estimate) / c.se, df) for df in (c.df, 2))
    assert c.method == inf.SEEDS_SKEW and t_df - 0.02 <= c.p_value <= t_seeds + 0.02
    assert c.low < c.estimate < c.high and (c.p_value <= 0.05) == c.excludes_zero()
    same = inf.compare(
        np.tile(a[:1], (3, 1)), np.tile(b[:1], (3, 1))
    )  # no training noise: seeds cost nothing
    assert same.df == pytest.approx(49)
    one_vs_three = inf.compare(a, b[:1])  # the one-seed arm borrows the other's per-seed variance
    assert one_vs_three.n_seeds == 1 and not one_vs_three.training_noise_covered
    assert one_vs_three.seed_var == pytest.approx(np.var(a.mean(axis=1), ddof=1) * (1 / 3 + 1))


def test_verdict_is_typed_and_prints_its_value():
    assert Verdict.WITHIN_NOISE == "≈ within noise" and f"{Verdict.BETTER}" == "better"
    assert Verdict("too few units") is Verdict.TOO_FEW_UNITS and not Verdict.UNTESTABLE.significant
    assert "not covered" in vd.seeds_note(1) and "between 2 and the units" in vd.seeds_note(3)


def test_the_opening_says_what_several_families_mean_for_the_whole():
    fams = [vd.Family("primary", 4), vd.Family("secondary", 60), vd.Family("copy", 0)]
    note = vd.families_note(fams)
    assert "2 families (primary, secondary)" in note and "up to 10%" in note
    assert vd.families_note(fams[:1]) == ""
