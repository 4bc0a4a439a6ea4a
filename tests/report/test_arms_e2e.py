"""End to end through the real CLI: a 3-seed, 2-variant tiny run with training-free arms, evaluated and reported."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import torch

from rlab.paths import BaseLayout, ExperimentLayout, meta_file
from rlab.report.assemble.collect import collect
from rlab.report.stats.verdicts import Verdict
from tests.cli.harness import run_process
from tests.orchestrate.helpers import EXPERIMENTS, pretrained_smoke_base, spec_args


@pytest.mark.slow
def test_three_seeds_two_variants_and_zero_shot_end_to_end(tiny_base_dir, tmp_path):
    base_dir, results = pretrained_smoke_base(tiny_base_dir, tmp_path)
    common = [
        *spec_args(EXPERIMENTS / "smoke.yaml", base_dir, results),
    ]
    trained = run_process(
        "continue", *common, "--variants", "rope,yarn", "--seeds", "3", "--zero-shot", timeout=900
    )
    assert trained.code == 0, trained.out + trained.err
    tags = [
        "smoke-rope",
        "smoke-rope-seed1",
        "smoke-rope-seed2",
        "smoke-rope-zeroshot",
        "smoke-yarn",
        "smoke-yarn-seed1",
        "smoke-yarn-seed2",
        "smoke-yarn-zeroshot",
    ]
    assert all(BaseLayout(base_dir).checkpoint_dir(t).is_dir() for t in tags)
    weights = {
        t: torch.load(
            sorted(BaseLayout(base_dir).checkpoint_dir(t).glob("model_*.pt"))[-1], weights_only=True
        )
        for t in ("smoke-yarn", "smoke-yarn-seed1")
    }
    # a replicate trains on its own draw of the data, so the seeds are not copies of one run
    assert any(not torch.equal(v, weights["smoke-yarn-seed1"][k]) for k, v in weights["smoke-yarn"].items())
    evaluated = run_process(
        "eval", *common, "--all", "--no-core", "--no-passkey", "--nproc", "1", timeout=900
    )
    assert evaluated.code == 0, evaluated.out + evaluated.err
    layout = ExperimentLayout(results, "smoke")
    assert all(layout.eval_json(t).is_file() for t in ["smoke", *tags])  # the base too, as a reference arm
    report = run_process(
        "report", "--experiment", "smoke", "--results-dir", str(results), "--format", "html", "-q"
    )
    assert report.code == 0, report.err

    data = collect(layout, "rope", draws=500)
    arms = {a.key: a for a in data.arms}
    assert set(arms) == {"rope", "yarn", "rope (zero-shot)", "yarn (zero-shot)", "base"}
    assert arms["yarn"].n_seeds == 3 and arms["yarn"].seeds == [42, 43, 44]
    comp = data.comparisons.set_index(["arm", "metric"])
    primary = comp.loc[("yarn", "primary_bpb")]
    assert primary["reference"] == "rope" and primary["n_seeds"] == 3
    # the smoke run scores fewer than 20 documents: the primary comparison is untestable, so in no family
    assert primary["verdict"] == Verdict.TOO_FEW_UNITS and primary["family"] == ""
    assert comp.loc[("yarn (zero-shot)", "extension_bpb"), "reference"] == "rope (zero-shot)"
    md = layout.comparison_md.read_text().splitlines()
    assert md[3].startswith("**Answer** (primary endpoint: BPB at 256 tokens")
    assert any(line.startswith("| yarn | ") for line in md)  # a row of the Answer table
    assert any(line.startswith("## Zero-shot vs continued") for line in md)
    html = layout.comparison_md.with_suffix(".html").read_text()
    assert "data:image/png;base64," in html and 'src="plots/' not in html
    csv = pd.read_csv(layout.results_csv).set_index("tag")
    assert (csv.loc[tags, "extension_bpb_n_units"] > 0).all()
    assert csv.loc["smoke-yarn-seed2", "compared_with"] == "rope"
    assert csv.loc["smoke-yarn-zeroshot", "compared_with"] == "rope (zero-shot)"


@pytest.mark.slow
def test_replicated_bases_end_to_end(tiny_base_dir, tmp_path):
    """pretrain --seeds 2 makes two bases; continue --replicate-base starts seed i of every variant from base i;
    the report pairs seed i of each arm on base i and says the seed covers pretraining noise."""

    base_dir, results = tmp_path / "base", tmp_path / "results"
    shutil.copytree(tiny_base_dir, base_dir)
    common = [
        *spec_args(EXPERIMENTS / "smoke.yaml", base_dir, results),
    ]
    pretrained = run_process("pretrain", *common, "--seeds", "2", "--nproc", "1", timeout=600)
    assert pretrained.code == 0, pretrained.out + pretrained.err
    base = BaseLayout(base_dir)
    seeds = [json.loads(meta_file(base.checkpoint_dir(t), 4).read_text()) for t in ("smoke", "smoke-seed1")]
    assert [m["run_config"]["train"]["seed"] for m in seeds] == [42, 43]
    arms = ["--variants", "rope,yarn", "--seeds", "2", "--replicate-base", "--nproc", "1"]
    trained = run_process("continue", *common, *arms, timeout=900)
    assert trained.code == 0, trained.out + trained.err
    for tag, parent in (
        ("smoke-yarn", "smoke"),
        ("smoke-yarn-seed1", "smoke-seed1"),
        ("smoke-rope-seed1", "smoke-seed1"),
    ):
        meta = json.loads(meta_file(base.checkpoint_dir(tag), 4).read_text())
        assert meta["lineage"] == {"parent_tag": parent, "parent_step": 4}
    flags = ["--no-core", "--no-passkey", "--no-ruler", "--nproc", "1"]
    evaluated = run_process("eval", *common, "--all", *flags, timeout=900)
    assert evaluated.code == 0, evaluated.out + evaluated.err
    report = run_process("report", "--experiment", "smoke", "--results-dir", str(results), "-q")
    assert report.code == 0, report.err

    layout = ExperimentLayout(results, "smoke")
    data = collect(layout, "rope", draws=300)
    by_key = {a.key: a for a in data.arms}
    assert set(by_key) == {"rope", "yarn"} and all(a.n_seeds == 2 for a in data.arms)
    comp = data.comparisons.set_index(["arm", "metric"]).loc[("yarn", "val_bpb")]
    assert comp["n_seeds"] == 2  # the tiny run scores too few documents for a test; the pairing is by seed
    md = layout.comparison_md.read_text()
    assert "Replicated bases: seed i of every arm continues base i (smoke, smoke-seed1)" in md
