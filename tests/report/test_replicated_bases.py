"""Replicated bases in the report: seed i of every arm continues base i, so per-seed differences pair arms on
one base and the methods say the seed covers pretraining noise; arms whose seeds do not line up are flagged."""

from __future__ import annotations

import pytest

from rlab.report.assemble.collect import collect
from rlab.report.build import write_report
from rlab.report.stats import inference as inf
from tests.report.conftest import write_run
from tests.report.test_arms import _replicate


@pytest.fixture
def replicated(fx):
    """rope and yarn in 2 seeds, seed i continuing base i (fx, fx-seed1), both bases evaluated; pi one seed."""
    for variant in ("rope", "yarn", "pi"):
        write_run(fx, f"fx-{variant}", variant, parent="fx")
    _replicate(fx, "fx-rope", "fx-rope-seed1", scale=1.02, variant="rope", seed=43, parent="fx-seed1")
    _replicate(fx, "fx-yarn", "fx-yarn-seed1", scale=1.01, variant="yarn", seed=43, parent="fx-seed1")
    for tag, scale, seed in (("fx", 1.1, 7), ("fx-seed1", 1.12, 8)):
        _replicate(fx, "fx-rope", tag, scale=scale, variant="base", seed=seed, steps=4, scratch=True)
    return fx


def test_seed_i_of_every_arm_pairs_on_base_i(replicated):
    data = collect(replicated, "rope", draws=300)
    arms = {a.key: a for a in data.arms}
    assert arms["yarn"].tags == ["fx-yarn", "fx-yarn-seed1"] and arms["rope"].tags == [
        "fx-rope",
        "fx-rope-seed1",
    ]
    assert arms["base"].tags == ["fx", "fx-seed1"] and arms["base"].seeds == [7, 8]
    comp = data.comparisons.set_index(["arm", "metric"]).loc[("yarn", "val_bpb")]
    assert (comp["reference"], comp["n_seeds"], comp["method"]) == (
        "rope",
        2,
        inf.SEEDS_SKEW,
    )
    assert comp["df"] >= 1.0  # Satterthwaite over the seed and unit terms: at least the S - 1 of seeds alone
    # the per-seed difference pairs seed i of yarn with seed i of rope (same base): 1.455 x (1, 1.01) - 1.47 x (1, 1.02)
    assert comp["diff"] == pytest.approx((1.455 * 2.01 - 1.47 * 2.02) / 2, rel=1e-4)
    out = write_report(replicated, draws=300)
    md = replicated.comparison_md.read_text()
    assert "Replicated bases: seed i of every arm continues base i (fx, fx-seed1)" in md
    assert "covers pretraining and continuation noise" in md
    assert not any("do not line up" in line for line in out.answer)


def test_seeds_on_crossed_bases_are_flagged(replicated):
    write_run(replicated, "fx-yarn-seed1", "yarn", seed=43, parent="fx")
    write_run(replicated, "fx-yarn", "yarn", seed=42, parent="fx-seed1")
    out = write_report(replicated, draws=300)
    assert any("Replicated bases do not line up across arms (yarn)" in line for line in out.answer)


def test_one_base_says_nothing_of_bases(fx):
    write_report(fx, draws=300)
    assert "Replicated bases" not in fx.comparison_md.read_text()
