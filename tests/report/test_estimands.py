"""The long-context estimands on the committed demo: every arm gets its rows, results.csv its columns, and a
tag without the data an estimand needs gets a blank, never an error."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlab.evals.bpb_length.records import TargetLoss
from rlab.paths import ExperimentLayout
from rlab.records.rows import write_rows
from rlab.report.assemble.collect import collect
from rlab.report.estimands import effective_length as el
from rlab.report.estimands import key_tokens as kt
from rlab.report.estimands.ratio import influence, paired_ratio
from rlab.report.power.spec import check_spec
from rlab.spec.loading import load_spec

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
    rows = {(r.arm, r.versus): r for r in demo.estimands.short_context_retention if r.metric == "bpb"}
    arms = {a.key for a in demo.arms if a.kind != "base"}
    assert {a for a, v in rows if v == "base"} == arms
    assert {a for a, v in rows if v == "control"} == arms - {"rope"}
    same = rows[("rope (zero-shot)", "base")]  # the base itself under another name: keeps exactly 100%
    assert same.keeps_pct == pytest.approx(100.0) and same.p_value is None and same.n_units == 32
    assert rows[("pi", "base")].keeps_pct < min(rows[(a, "base")].keeps_pct for a in ("rope", "ntk", "yarn"))
    columns = demo.results.columns
    assert "short_retention_bpb_pct_n_units" in columns
    assert "short_retention_bpb_vs_rope_pct_ci_low" in columns


def test_effective_length_has_an_interval_on_the_demos_32_keys(demo):
    rows = demo.estimands.effective_length
    likelihood = [r for r in rows if r.source == "passkey_likelihood"]
    assert len(likelihood) == 2 * len(demo.arms)  # absolute and relative threshold for every arm
    assert all(r.lengths == [256, 1024] and r.n_units == 32 for r in likelihood)
    assert all("[" in r.cell() for r in likelihood)  # 32 keys a length: every length has its interval
    assert "effective_length_passkey_likelihood_abs_censored" in demo.results.columns


def test_longest_passing_stops_at_the_first_failing_length():
    acc = np.array([[0.9, 0.9, 0.5, 0.9], [0.5, 0.9, 0.9, 0.9], [0.9, 0.9, 0.9, 0.9]])
    assert el.longest_passing(acc, 0.856).tolist() == [2, 0, 4]


def _plant_targets(root: Path, gain: dict[str, float]) -> None:
    """bpb_targets.csv for every demo tag: 64 targets per block, their nats summing to the block's, a bigram
    repeat per target; targets repeated 16-31 tokens back lose 1 nat from L=256 on (the base included: its
    drop from L=128 picks them) and `gain[tag]` nats more at every length from 512 on."""

    rng = np.random.default_rng(0)
    repeat = rng.choice([0, 3, 20, 100], p=[0.6, 0.15, 0.15, 0.1], size=(64, 64))
    noise = rng.normal(0, 0.3, size=(64, 64))
    for tag_dir in (root / "demo" / "evals").iterdir():
        # a seed replicate gets its first seed's units: the planted gain, not the demo's seed noise, is tested
        units = pd.read_csv(tag_dir.with_name(tag_dir.name.replace("-seed1", "")) / "bpb_units.csv")
        rows = []
        for u in units[units["metric"].str.startswith("len_")].itertuples():
            length, unit = int(u.metric[4:]), int(u.unit)
            extra = (repeat[unit] == 20) * (
                (length >= 256) * -1.0 - (length >= 512) * gain.get(tag_dir.name, 0)
            )
            nats = u.nats / 64 + noise[unit] + extra - (noise[unit] + extra).mean()
            rows += [
                TargetLoss(
                    length=length,
                    unit=str(unit),
                    position=p,
                    token=7,
                    bytes=int(u.bytes) // 64,
                    repeat=int(repeat[unit, p]),
                    nats=float(nats[p]),
                )
                for p in range(64)
            ]
        write_rows(tag_dir / "bpb_targets.csv", rows)


@pytest.mark.slow
def test_key_token_bpb_finds_a_gain_on_the_targets_that_need_context(tmp_path):
    shutil.copytree(REPO / "results" / "demo", tmp_path / "demo")
    for tag in (tmp_path / "demo" / "evals").iterdir():
        (tag / "core_examples.csv").unlink()
    _plant_targets(tmp_path, {"demo-yarn": 0.5, "demo-yarn-seed1": 0.5})  # both seeds
    data = collect(ExperimentLayout(tmp_path, "demo"), draws=2000)  # Holm over ~50 tests needs p < 1e-3
    rows = {(r.arm, r.length): r for r in data.estimands.key_token_bpb}
    yarn = rows[("yarn", 1024)]
    assert (
        yarn.share is not None and 0.1 < yarn.share <= 0.2
    )  # the repeated-20-back cell, chosen cross-fitted
    assert yarn.reference == "rope" and yarn.verdict.value == "better" and yarn.n_units == 32
    assert rows[("yarn", 256)].verdict.value != "better"  # no gain planted within L0
    assert "key_bpb_len_1024_verdict_vs_rope" in data.results.columns
    assert "bigram-repeat" in rows[("pi", 512)].selection


def test_selection_is_cross_fitted_by_document_halves():

    drop = np.r_[np.full(50, 2.0), np.zeros(150), np.zeros(50), np.zeros(150)]
    cells = np.r_[np.ones(50), np.zeros(150), np.ones(50), np.zeros(150)].astype(int)
    folds = np.r_[np.zeros(200), np.ones(200)].astype(int)
    mask = kt.key_mask(drop, cells, folds)
    assert (
        mask[200:250].all() and not mask[:200].any()
    )  # half 0's big drops choose half 1's targets, not its own
    assert kt.bucket(np.array([0, 1, 2, 3, 4, 100])).tolist() == [0, 1, 2, 2, 3, 7]


def test_power_says_how_many_keys_the_effective_length_needs():

    assert el.keys_needed() == 48 and el.keys_note(80) is None  # passkey's default: 20 trials x 4 depths
    note = el.keys_note(4, depths=4)
    assert note is not None and "no interval" in note and "eval.passkey_trials >= 12" in note
    demo = load_spec(REPO / "experiments" / "demo.yaml")
    assert any("keys per length" in w for w in check_spec(demo, 256).warnings())
