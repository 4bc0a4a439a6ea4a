"""Bootstrap sanity: zero differences contain 0, large ones exclude it, and draws are seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlab.report import uncertainty as unc


def _units(rng: np.random.Generator, n: int, bpb: float, noise: float) -> tuple[np.ndarray, np.ndarray]:
    nbytes = rng.integers(500, 1500, size=n).astype(float)
    per_unit = bpb * (1.0 + noise * rng.standard_normal(n))
    return per_unit * nbytes * math.log(2), nbytes


def test_bpb_interval_is_ratio_of_sums_and_brackets_it():
    nats = np.array([700.0, 100.0])
    nbytes = np.array([1000.0, 100.0])  # a mean of per-unit BPBs would weight the short unit equally
    iv = unc.bpb_interval(nats, nbytes, key="t", n_boot=200)
    assert iv.estimate == pytest.approx(800.0 / (math.log(2) * 1100.0))
    assert iv.low <= iv.estimate <= iv.high
    assert unc.bpb_interval(np.array([]), np.array([]), key="t") is None


def test_zero_difference_contains_zero():
    rng = np.random.default_rng(0)
    nats, nbytes = _units(rng, 64, 1.2, 0.1)
    same = unc.bpb_paired_diff(nats, nbytes, nats, nbytes, key="same")
    assert same.diff.low <= 0.0 <= same.diff.high
    assert unc.verdict(same.diff, lower_is_better=True) == "≈ within noise"
    # Two variants with the same true BPB but independent per-unit noise: still within noise.
    a = _units(np.random.default_rng(1), 64, 1.2, 0.05)
    b = (a[0] * (1 + 0.05 * np.random.default_rng(2).standard_normal(64)), a[1])
    d = unc.bpb_paired_diff(*a, *b, key="noise")
    assert d.diff.low < 0.0 < d.diff.high


def test_large_true_difference_excludes_zero():
    rng = np.random.default_rng(0)
    nats, nbytes = _units(rng, 64, 1.2, 0.1)
    worse = unc.bpb_paired_diff(nats * 1.05, nbytes, nats, nbytes, key="worse")
    assert worse.diff.low > 0.0 and worse.rel_pct.estimate == pytest.approx(5.0)
    assert worse.rel_pct.low == pytest.approx(5.0) and worse.rel_pct.high == pytest.approx(5.0)
    assert unc.verdict(worse.diff, lower_is_better=True) == "worse"
    better = unc.bpb_paired_diff(nats * 0.9, nbytes, nats, nbytes, key="better")
    assert unc.verdict(better.diff, lower_is_better=True) == "better"


def test_pairing_beats_unpaired_noise():
    """A 1% gain hidden under 20% per-unit variation is found only because units are shared."""
    nats, nbytes = _units(np.random.default_rng(0), 40, 1.2, 0.2)
    d = unc.bpb_paired_diff(nats * 0.99, nbytes, nats, nbytes, key="k")
    a = unc.bpb_interval(nats * 0.99, nbytes, key="a")
    b = unc.bpb_interval(nats, nbytes, key="b")
    assert d.diff.high < 0  # paired: a real win
    assert a.high > b.low  # separately, the intervals overlap


def test_core_interval_and_paired_difference():
    rng = np.random.default_rng(0)
    base = {"t1": 0.25, "t2": 0.0}
    a = {"t1": (rng.random(200) < 0.5).astype(float), "t2": (rng.random(150) < 0.4).astype(float)}
    iv = unc.core_interval(a, base, key="a")
    expected = ((a["t1"].mean() - 0.25) / 0.75 + a["t2"].mean()) / 2
    assert iv.estimate == pytest.approx(expected)
    assert iv.low < expected < iv.high
    same = unc.core_paired_diff({t: (v, v) for t, v in a.items()}, base, key="s")
    assert same.diff.low == 0.0 == same.diff.high and same.diff.estimate == 0.0
    assert unc.verdict(same.diff, lower_is_better=False) == "≈ within noise"
    flipped = {t: (np.ones_like(v), v) for t, v in a.items()}  # every example right vs about half
    big = unc.core_paired_diff(flipped, base, key="b")
    assert big.diff.low > 0.0 and unc.verdict(big.diff, lower_is_better=False) == "better"
    assert unc.core_interval({}, base, key="e") is None


def test_same_seed_same_interval_other_seed_differs():
    nats, nbytes = _units(np.random.default_rng(0), 32, 1.0, 0.1)
    one = unc.bpb_interval(nats, nbytes, key="x", seed=7)
    assert one == unc.bpb_interval(nats, nbytes, key="x", seed=7)
    assert one != unc.bpb_interval(nats, nbytes, key="x", seed=8)


def test_chunked_draws_equal_shape_and_are_finite():
    # more elements than one chunk holds: the draw is split, results stay well-formed
    n = 5000
    nats, nbytes = _units(np.random.default_rng(0), n, 1.0, 0.1)
    iv = unc.bpb_interval(nats, nbytes, key="big", n_boot=1000)
    assert math.isfinite(iv.low) and iv.low < iv.estimate < iv.high


def _correlated_blocks(
    rng: np.random.Generator, docs: int, blocks_per_doc: int, doc_sd: float, block_sd: float
):
    """Per-block (nats, bytes, doc) of two variants whose difference shares a per-document effect."""
    doc = np.repeat(np.arange(docs), blocks_per_doc)
    nbytes = np.full(len(doc), 200.0)
    base = 1.5 * (1 + 0.1 * rng.standard_normal(docs))[doc]
    effect = (doc_sd * rng.standard_normal(docs))[doc] + block_sd * rng.standard_normal(len(doc))
    nats_b = base * nbytes * math.log(2)
    nats_a = (base + effect) * nbytes * math.log(2)
    return nats_a, nats_b, nbytes, doc


def test_cluster_bootstrap_is_wider_than_block_bootstrap_on_correlated_data():
    """Blocks of one document move together: resampling blocks one by one understates the uncertainty."""
    nats_a, nats_b, nbytes, doc = _correlated_blocks(np.random.default_rng(3), 30, 8, 0.02, 0.005)
    by_block = unc.bpb_paired_diff(nats_a, nbytes, nats_b, nbytes, key="d")
    by_doc = unc.bpb_paired_diff(nats_a, nbytes, nats_b, nbytes, key="d", clusters=doc)
    assert by_block.n_units == 240 and by_doc.n_units == 30
    assert by_doc.diff.estimate == pytest.approx(by_block.diff.estimate)
    assert by_doc.diff.half_width > 2.0 * by_block.diff.half_width  # ~sqrt(8) for a pure document effect
    single = unc.bpb_interval(nats_a, nbytes, key="a", clusters=doc)
    assert single.n_units == 30 and single.half_width > unc.bpb_interval(nats_a, nbytes, key="a").half_width


def test_cluster_bootstrap_matches_block_bootstrap_on_independent_blocks():
    nats_a, nats_b, nbytes, doc = _correlated_blocks(np.random.default_rng(4), 40, 6, 0.0, 0.02)
    by_block = unc.bpb_paired_diff(nats_a, nbytes, nats_b, nbytes, key="d")
    by_doc = unc.bpb_paired_diff(nats_a, nbytes, nats_b, nbytes, key="d", clusters=doc)
    assert by_doc.diff.half_width == pytest.approx(by_block.diff.half_width, rel=0.25)


def test_too_few_units_gives_no_verdict():
    nats, nbytes = _units(np.random.default_rng(0), 12, 1.2, 0.1)
    d = unc.bpb_paired_diff(nats * 1.2, nbytes, nats, nbytes, key="few")
    assert d.diff.low > 0  # a clear difference, but on 12 units
    assert unc.verdict(d.diff, lower_is_better=True) == "too few units (n=12)"
    nats, nbytes = _units(np.random.default_rng(0), 20, 1.2, 0.1)
    d = unc.bpb_paired_diff(nats * 1.2, nbytes, nats, nbytes, key="enough")
    assert unc.verdict(d.diff, lower_is_better=True) == "worse"


def test_seeds_widen_the_interval_and_estimate_is_the_seed_mean():
    """Three training replicates that disagree: the two-level bootstrap carries their spread."""
    rng = np.random.default_rng(5)
    nats, nbytes = _units(rng, 60, 1.2, 0.05)
    shifts = np.array([0.97, 1.0, 1.03])
    seeds_a = nats[None, :] * shifts[:, None]
    one = unc.bpb_paired_diff(nats, nbytes, nats, nbytes, key="s")
    three = unc.bpb_paired_diff(seeds_a, np.tile(nbytes, (3, 1)), nats, nbytes, key="s")
    assert three.diff.estimate == pytest.approx(0.0, abs=1e-12)
    assert three.diff.n_seeds == 1 and one.diff.half_width == 0.0
    assert three.diff.half_width > 0.01
    iv = unc.bpb_interval(seeds_a, np.tile(nbytes, (3, 1)), key="i")
    assert iv.n_seeds == 3
    assert iv.estimate == pytest.approx(np.mean([unc.bpb_ratio(s, nbytes) for s in seeds_a]))


def test_bootstrap_p_value_and_holm():
    assert unc.boot_p_value(np.zeros(100), 0.0) == 1.0
    draws = np.random.default_rng(0).normal(1.0, 0.5, 4000)
    assert unc.boot_p_value(draws, 1.0) == pytest.approx(math.erfc(2 / math.sqrt(2)), rel=0.05)  # z = 2
    assert unc.boot_p_value(draws * 0.1 + 0.9, 1.0) < 1e-6  # far below 1 / n_boot
    # Holm: sorted p * (m - rank), made monotone; NaN is left out of the family.
    adj = unc.holm([0.01, 0.04, math.nan, 0.03, 0.2])
    assert adj[0] == pytest.approx(0.04) and adj[3] == pytest.approx(0.09)
    assert adj[1] == pytest.approx(0.09) and adj[4] == pytest.approx(0.2) and math.isnan(adj[2])
    d = unc.Interval(-0.1, -0.2, -0.01, n_units=50)
    assert unc.verdict(d, lower_is_better=True) == "better"
    assert unc.verdict(d, lower_is_better=True, significant=False) == "≈ within noise"


def test_relative_change_only_where_the_baseline_is_positive():
    a = {"t": np.array([1.0, 0.0] * 20)}
    b = {"t": np.array([0.0, 1.0] * 10 + [0.0, 0.0] * 10)}
    d = unc.core_paired_diff({"t": (a["t"], b["t"])}, {"t": 0.5}, key="c")  # baseline CORE < 0
    assert d.rel_pct is None and d.n_units == 40


def test_wilson_and_proportion_difference():
    zero = unc.wilson(0, 10)
    assert zero.estimate == 0.0 and zero.low == 0.0 and 0.2 < zero.high < 0.35 and zero.n_units == 10
    same = unc.proportion_diff(0, 10, 0, 10)
    assert same.low < 0 < same.high and same.p_value == 1.0
    big = unc.proportion_diff(45, 50, 5, 50)
    assert big.low > 0 and big.p_value < 1e-6
