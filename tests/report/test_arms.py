"""Arms in the report: seed replicates pooled (seed means, wider intervals), a zero-shot arm, the base as reference."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from rlab.report.assemble.collect import collect
from rlab.report.build import write_report
from tests.report.conftest import write_run


def _replicate(fx, src: str, dst: str, *, scale: float, variant: str, **run) -> None:
    """Copy `src`'s eval outputs to tag `dst` of `variant` with every BPB unit's nats scaled (a different model),
    and its run.json (`write_run`'s `run` fields)."""
    shutil.copytree(fx.eval_dir(src), fx.eval_dir(dst))
    ev = json.loads(fx.eval_json(dst).read_text())
    ev["tag"] = dst
    ev["variant"] = variant
    fx.eval_json(dst).write_text(json.dumps(ev))
    units = pd.read_csv(fx.eval_dir(dst) / "bpb_units.csv")
    units["nats"] *= scale
    units.to_csv(fx.eval_dir(dst) / "bpb_units.csv", index=False)
    write_run(fx, dst, variant, **run)


@pytest.fixture
def arms_fx(fx):
    """fx plus: yarn in 3 seeds that disagree, yarn zero-shot (5% worse) and the base, both untrained."""
    write_run(fx, "fx-yarn", "yarn", seed=42)
    _replicate(fx, "fx-yarn", "fx-yarn-seed1", scale=1.01, variant="yarn", seed=43)
    _replicate(fx, "fx-yarn", "fx-yarn-seed2", scale=0.99, variant="yarn", seed=44)
    _replicate(fx, "fx-yarn", "fx-yarn-zeroshot", scale=1.05, variant="yarn", steps=0)
    _replicate(fx, "fx-rope", "fx", scale=1.1, variant="base", scratch=True)
    return fx


def test_seeds_pool_into_one_arm_with_wider_intervals(arms_fx):
    data = collect(arms_fx, "rope", draws=400)
    arms = {a.key: a for a in data.arms}
    assert arms["yarn"].tags == ["fx-yarn", "fx-yarn-seed1", "fx-yarn-seed2"] and arms["yarn"].seeds == [
        42,
        43,
        44,
    ]
    assert arms["yarn (zero-shot)"].kind == "zero-shot" and arms["base"].kind == "base"
    pooled = data.scalars.set_index(["arm", "metric"]).loc[("yarn", "val_bpb")]
    assert pooled["value"] == pytest.approx(1.455, rel=1e-6)  # the mean of 1.455 x (1, 1.01, 0.99)
    assert pooled["n_seeds"] == 3 and pooled["n_units"] == 24
    single = data.tag_scalars.set_index(["tag", "metric"]).loc[("fx-yarn", "val_bpb")]
    assert pooled["ci_high"] - pooled["ci_low"] > 1.2 * (single["ci_high"] - single["ci_low"])  # seed spread
    row = data.results.set_index("tag").loc["fx-yarn-seed1"]
    assert (row["arm"], row["seed"], row["n_seeds"]) == ("yarn", 43, 3)
    assert row["val_bpb"] == pytest.approx(
        1.455 * 1.01, rel=1e-6
    )  # the tag's own value; comparisons are the arm's
    comp = data.comparisons.set_index(["arm", "metric"])
    assert comp.loc[("yarn (zero-shot)", "extension_bpb"), "family"] == "secondary"
    assert comp.loc[("yarn", "extension_bpb"), "family"] == "secondary"  # the extension explains the level
    assert comp.loc[("yarn", "primary_bpb"), "family"] == "primary"
    assert comp.loc[("base", "val_bpb"), "diff"] == pytest.approx(0.147, rel=1e-4)


def test_report_shows_zero_shot_next_to_continued(arms_fx):
    out = write_report(arms_fx, draws=300)
    md = arms_fx.comparison_md.read_text()
    assert "## Zero-shot vs continued" in md
    table = next(t for t in out.tables if t.title.startswith("Zero-shot vs continued"))
    rows = table.frame.set_index("variant")
    assert rows.loc["yarn", "zero-shot"] and rows.loc["yarn", "continued"]
    # the primary endpoint of the base: its BPB at 4T = 512, 1.1 x rope's 2.60
    assert rows.loc["base (reference)", "zero-shot"].startswith("2.8600")
    assert "yarn ×3 seeds" in md
    assert any("not seed-to-seed training noise" in line for line in out.answer)  # rope and pi have one seed


def test_one_seed_says_training_noise_is_not_covered(fx):
    out = write_report(fx, draws=300)
    assert any("not seed-to-seed training noise" in line for line in out.answer)
    assert out.answer[0].startswith("**pi** vs rope: ")


def test_zero_shot_arm_is_compared_with_the_untrained_base(arms_fx):
    """Zero-shot vs the base (nothing trained on either side): the RoPE change alone, not training."""
    data = collect(arms_fx, "rope", draws=300)
    comp = data.comparisons.set_index(["arm", "metric"])
    assert comp.loc[("yarn (zero-shot)", "val_bpb"), "reference"] == "base"
    assert comp.loc[("yarn", "val_bpb"), "reference"] == "rope"
    # 1.05 x yarn's 1.455 vs the base (1.1 x rope's 1.47), not vs rope's 1.47
    assert comp.loc[("yarn (zero-shot)", "val_bpb"), "diff"] == pytest.approx(
        1.05 * 1.455 - 1.1 * 1.47, rel=1e-4
    )
    res = data.results.set_index("tag")
    assert res.loc["fx-yarn-zeroshot", "compared_with"] == "base"
    assert res.loc["fx-yarn-seed1", "compared_with"] == "rope"


def test_zero_shot_arms_are_compared_with_the_baseline_zero_shot_arm(arms_fx):
    _replicate(arms_fx, "fx-rope", "fx-rope-zeroshot", scale=1.1, variant="rope", steps=0)
    out = write_report(arms_fx, draws=300)
    comp = out.data.comparisons
    assert set(comp[comp["kind"] == "zero-shot"]["reference"]) == {"rope (zero-shot)"}
    assert not (comp["arm"] == "rope (zero-shot)").any()  # the reference is not compared with itself
    table = next(t for t in out.tables if t.title.startswith("Zero-shot vs continued"))
    assert "zero-shot Δ vs rope (zero-shot)" in table.frame.columns
    assert "Zero-shot arms are compared with `rope (zero-shot)`" in arms_fx.comparison_md.read_text()
