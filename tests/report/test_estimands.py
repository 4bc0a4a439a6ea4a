"""The long-context estimands on the committed demo: every arm gets its rows, results.csv its columns, and a
tag without the data an estimand needs gets a blank, never an error."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rlab.paths import ExperimentLayout
from rlab.report.collect import collect
from rlab.report.estimands import effective_length as el
from rlab.report.estimands.ratio import influence, paired_ratio

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    shutil.copytree(REPO / "results" / "demo", root / "demo")
    for tag in (root / "demo" / "evals").iterdir():
        (tag / "core_examples.csv").unlink()  # keep the test fast: CORE retention is covered by calibration
    return collect(ExperimentLayout(root, "demo"), draws=200)


def test_influence_values_average_to_the_ratio_of_sums():
    rng = np.random.default_rng(0)
    num, den = rng.random((2, 30)) + 0.5
    assert influence(num, den).mean() == pytest.approx(num.sum() / den.sum())
    r = paired_ratio(num, den, key="t")
    assert r is not None and r.low < num.sum() / den.sum() < r.high and r.n_units == 30


def test_every_arm_keeps_a_share_of_its_bases_bpb_at_l0(demo):
    rows = {(r.arm, r.versus): r for r in demo.estimands["short_context_retention"] if r.metric == "bpb"}
    arms = {a.key for a in demo.arms if a.kind != "base"}
    assert {a for a, v in rows if v == "base"} == arms
    assert {a for a, v in rows if v == "control"} == arms - {"rope"}
    same = rows[("rope (zero-shot)", "base")]  # the base itself under another name: keeps exactly 100%
    assert same.keeps_pct == pytest.approx(100.0) and same.p_value is None and same.n_units == 52
    assert rows[("pi", "base")].high_pct < 100.0  # PI at L0 is measurably worse than its base
    columns = demo.results.columns
    assert "short_retention_bpb_vs_base_pct_n_units" in columns
    assert "short_retention_bpb_vs_rope_pct_ci_low" in columns


def test_effective_length_is_censored_and_needs_keys_for_an_interval(demo):
    rows = demo.estimands["effective_length"]
    assert {r.source for r in rows} == {"passkey_likelihood"}  # generation retrieves nothing in the demo
    assert all(r.lengths == [256, 1024] and r.n_units == 4 and r.low is None for r in rows)
    assert rows[0].cell() == "256"  # no interval on 4 keys (the caption says why)
    assert "effective_length_passkey_likelihood_abs_censored" in demo.results.columns


def test_longest_passing_stops_at_the_first_failing_length():
    acc = np.array([[0.9, 0.9, 0.5, 0.9], [0.5, 0.9, 0.9, 0.9], [0.9, 0.9, 0.9, 0.9]])
    assert el.longest_passing(acc, 0.856).tolist() == [2, 0, 4]
