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
