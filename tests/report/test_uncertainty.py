"""The eval units as `inference` sees them: BPB by document, CORE stratified by task, passkey by key."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlab.report.stats import inference as inf
from rlab.report.stats import uncertainty as unc
from rlab.report.stats import verdicts as vd
from rlab.report.stats.verdicts import Verdict


def _units(rng: np.random.Generator, n: int, bpb: float, noise: float) -> tuple[np.ndarray, np.ndarray]:
    nbytes = rng.integers(500, 1500, size=n).astype(float)
    per_unit = bpb * (1.0 + noise * rng.standard_normal(n))
    return per_unit * nbytes * math.log(2), nbytes


def _verdict(c: inf.Comparison, lower_is_better: bool = True) -> Verdict:
    return vd.decide(c, c.p_value, lower_is_better)


def test_bpb_interval_is_ratio_of_sums_and_brackets_it():
    nats = np.array([700.0, 100.0])
    nbytes = np.array([1000.0, 100.0])  # a mean of per-unit BPBs would weight the short unit equally
    iv = unc.bpb_interval(nats, nbytes)
    assert iv.estimate == pytest.approx(800.0 / (math.log(2) * 1100.0))
    assert iv.low <= iv.estimate <= iv.high
    assert unc.bpb_interval(np.array([]), np.array([])) is None


def test_zero_difference_is_untestable_and_noise_is_within_noise():
    rng = np.random.default_rng(0)
    nats, nbytes = _units(rng, 64, 1.2, 0.1)
    same = unc.bpb_paired_diff(nats, nbytes, nats, nbytes, key="same")
    assert same.diff.p_value is None and same.diff.reason == "no variation"
    assert _verdict(same.diff) == Verdict.UNTESTABLE
    a = _units(np.random.default_rng(1), 64, 1.2, 0.05)
    b = (a[0] * (1 + 0.05 * np.random.default_rng(2).standard_normal(64)), a[1])
    d = unc.bpb_paired_diff(*a, *b, key="noise")
    assert d.diff.low < 0.0 < d.diff.high and d.diff.p_value > 0.05
    assert _verdict(d.diff) == Verdict.WITHIN_NOISE and d.diff.mde() > abs(d.diff.estimate)


def test_large_true_difference_is_significant_with_its_relative_change():
    rng = np.random.default_rng(0)
    nats, nbytes = _units(rng, 64, 1.2, 0.1)
    noisy = nats * (1 + 0.01 * rng.standard_normal(64))
    worse = unc.bpb_paired_diff(noisy * 1.05, nbytes, nats, nbytes, key="worse")
    assert worse.diff.low > 0.0 and worse.rel_pct[0] == pytest.approx(5.0, abs=0.3)
    assert worse.rel_pct[1] < worse.rel_pct[0] < worse.rel_pct[2]
    assert (
        worse.diff.method == "skew-corrected t, sign-flip reference (Monte Carlo)"
        and worse.diff.p_value == 1 / (inf.SIGN_FLIP_DRAWS + 1)
    )
    assert _verdict(worse.diff) == Verdict.WORSE
    better = unc.bpb_paired_diff(noisy * 0.9, nbytes, nats, nbytes, key="better")
    assert _verdict(better.diff) == Verdict.BETTER


def test_pairing_beats_unpaired_noise():
    """A 1% gain hidden under 20% per-unit variation is found only because units are shared."""
    nats, nbytes = _units(np.random.default_rng(0), 40, 1.2, 0.2)
    jitter = 1 + 0.002 * np.random.default_rng(1).standard_normal(40)
    d = unc.bpb_paired_diff(nats * 0.99 * jitter, nbytes, nats, nbytes, key="k")
    a = unc.bpb_interval(nats * 0.99, nbytes)
    b = unc.bpb_interval(nats, nbytes)
    assert d.diff.high < 0  # paired: a real win
    assert a.high > b.low  # separately, the intervals overlap


def test_core_interval_and_paired_difference():
    rng = np.random.default_rng(0)
    base = {"t1": 0.25, "t2": 0.0}
    a = {"t1": (rng.random(200) < 0.5).astype(float), "t2": (rng.random(150) < 0.4).astype(float)}
    iv = unc.core_interval(a, base)
    expected = ((a["t1"].mean() - 0.25) / 0.75 + a["t2"].mean()) / 2
    assert iv.estimate == pytest.approx(expected) and iv.n_units == 350
    assert iv.low < expected < iv.high
    same = unc.core_paired_diff({t: (v, v) for t, v in a.items()}, base, key="s")
    assert same.diff.estimate == 0.0 and _verdict(same.diff, False) == Verdict.UNTESTABLE
    flipped = {t: (np.ones_like(v), v) for t, v in a.items()}  # every example right vs about half
    big = unc.core_paired_diff(flipped, base, key="b")
    assert big.diff.low > 0.0 and _verdict(big.diff, lower_is_better=False) == Verdict.BETTER
    assert unc.core_interval({}, base) is None


def test_core_variance_is_stratified_by_task():
    """Two tasks at very different accuracies: pooling within tasks ignores the gap between them."""
    rng = np.random.default_rng(3)
    hi, lo = (rng.random(100) < 0.9).astype(float), (rng.random(100) < 0.1).astype(float)
    strat = unc.core_interval({"a": hi, "b": lo}, {"a": 0.0, "b": 0.0})
    pooled = inf.level(np.concatenate([hi, lo]))
    assert strat.estimate == pytest.approx(pooled.estimate)
    assert strat.half_width < 0.7 * pooled.half_width


def test_cluster_sums_make_documents_the_units():
    """Blocks of one document move together: summed per document, the interval widens about sqrt(blocks)."""
    rng = np.random.default_rng(3)
    docs, per = 30, 8
    doc = np.repeat(np.arange(docs), per)
    nbytes = np.full(len(doc), 200.0)
    base = 1.5 * (1 + 0.1 * rng.standard_normal(docs))[doc]
    effect = (0.02 * rng.standard_normal(docs))[doc] + 0.005 * rng.standard_normal(len(doc))
    nb, na = base * nbytes * math.log(2), (base + effect) * nbytes * math.log(2)
    by_block = unc.bpb_paired_diff(na, nbytes, nb, nbytes, key="d")
    by_doc = unc.bpb_paired_diff(na, nbytes, nb, nbytes, key="d", clusters=doc)
    assert by_block.n_units == 240 and by_doc.n_units == 30
    assert by_doc.diff.estimate == pytest.approx(by_block.diff.estimate)
    assert by_doc.diff.half_width > 2.0 * by_block.diff.half_width


def test_too_few_units_gives_no_p_value_and_no_verdict():
    nats, nbytes = _units(np.random.default_rng(0), 12, 1.2, 0.1)
    jitter = 1 + 0.01 * np.random.default_rng(1).standard_normal(12)
    d = unc.bpb_paired_diff(nats * 1.2 * jitter, nbytes, nats, nbytes, key="few")
    assert d.diff.low > 0 and d.diff.p_value is None and d.diff.reason == "too few units"
    assert (
        _verdict(d.diff) == Verdict.TOO_FEW_UNITS
        and Verdict.TOO_FEW_UNITS.label(12) == "too few units (n=12)"
    )
    nats, nbytes = _units(np.random.default_rng(0), 20, 1.2, 0.1)
    d = unc.bpb_paired_diff(nats * 1.2 * jitter.repeat(2)[:20], nbytes, nats, nbytes, key="enough")
    assert _verdict(d.diff) == Verdict.WORSE


def test_seeds_are_the_replicate_of_training_noise():
    """Three training replicates that disagree: the seed term carries their spread on S - 1 = 2 df."""
    rng = np.random.default_rng(5)
    nats, nbytes = _units(rng, 60, 1.2, 0.05)
    shifts = np.array([0.97, 1.0, 1.03])
    seeds_a = nats[None, :] * shifts[:, None] * (1 + 0.001 * rng.standard_normal((3, 60)))
    three = unc.bpb_paired_diff(
        seeds_a, np.tile(nbytes, (3, 1)), np.tile(nats, (3, 1)), np.tile(nbytes, (3, 1)), key="s"
    )
    # seed noise dominates: Satterthwaite df ~ S - 1
    assert three.diff.n_seeds == 3 and three.diff.df == pytest.approx(2, abs=0.01)
    assert three.diff.method == inf.SEEDS_SKEW
    assert three.diff.training_noise_covered and three.diff.half_width > 0.05
    assert three.diff.p_value > 0.05
    iv = unc.bpb_interval(seeds_a, np.tile(nbytes, (3, 1)))
    assert iv.n_seeds == 3 and iv.df == pytest.approx(2, abs=0.1)
    assert iv.estimate == pytest.approx(np.mean([unc.bpb_ratio(s, nbytes) for s in seeds_a]))


def test_passkey_is_paired_by_key():
    rng = np.random.default_rng(0)
    b = (rng.random(40) < 0.5).astype(float)
    a = b.copy()
    a[:10] = 1.0  # a retrieves every key b does, and some more
    d = unc.passkey_paired_diff(a, b, np.arange(40), key="pk")
    assert d.n_units == 40 and d.diff.estimate == pytest.approx((a - b).mean())
    discordant = int((a != b).sum())
    assert d.diff.p_value == pytest.approx(2 * 0.5**discordant, rel=0.5) or d.diff.p_value < 0.01
    assert unc.passkey_paired_diff(np.zeros(24), np.zeros(24), np.arange(24), key="z").diff.p_value is None


def test_wilson():
    zero = unc.wilson(0, 10)
    assert zero.estimate == 0.0 and zero.low == 0.0 and 0.2 < zero.high < 0.35 and zero.n_units == 10
