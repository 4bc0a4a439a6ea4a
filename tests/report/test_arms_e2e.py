"""End to end through the real CLI: a 3-seed, 2-variant tiny run with training-free arms, evaluated and reported."""

from __future__ import annotations

import pandas as pd
import pytest

from rlab.paths import BaseLayout, ExperimentLayout
from rlab.report.collect import collect
from rlab.report.inference import Verdict
from tests.cli.test_continue_cli import EXPERIMENTS, pretrained_smoke_base, rlab


@pytest.mark.slow
def test_three_seeds_two_variants_and_zero_shot_end_to_end(tiny_base_dir, tmp_path):
    base_dir, results = pretrained_smoke_base(tiny_base_dir, tmp_path)
    common = [
        "--spec",
        str(EXPERIMENTS / "smoke.yaml"),
        "--base-dir",
        str(base_dir),
        "--results-dir",
        str(results),
    ]
    trained = rlab("continue", *common, "--variants", "rope,yarn", "--seeds", "3", "--zero-shot", timeout=900)
    assert trained.returncode == 0, trained.stdout + trained.stderr
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
    evaluated = rlab("eval", *common, "--all", "--no-core", "--no-passkey", "--nproc", "1", timeout=900)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    layout = ExperimentLayout(results, "smoke")
    assert all(layout.eval_json(t).is_file() for t in ["smoke", *tags])  # the base too, as a reference arm
    report = rlab("report", "--experiment", "smoke", "--results-dir", str(results), "--format", "html", "-q")
    assert report.returncode == 0, report.stderr

    data = collect(layout, "rope", draws=500)
    arms = {a.key: a for a in data.arms}
    assert set(arms) == {"rope", "yarn", "rope (zero-shot)", "yarn (zero-shot)", "base"}
    assert arms["yarn"].n_seeds == 3 and arms["yarn"].seeds == [42, 43, 44]
    comp = data.comparisons.set_index(["arm", "metric"])
    primary = comp.loc[("yarn", "extension_bpb")]
    assert primary["reference"] == "rope" and primary["n_seeds"] == 3
    # the smoke run scores fewer than 20 documents: the primary comparison is untestable, so in no family
    assert primary["verdict"] == Verdict.TOO_FEW_UNITS and primary["family"] == ""
    assert comp.loc[("yarn (zero-shot)", "extension_bpb"), "reference"] == "rope (zero-shot)"
    md = layout.comparison_md.read_text().splitlines()
    assert md[2].startswith("**Answer** (primary endpoint: extension: BPB at 256 minus BPB at 128 tokens")
    assert md[4].startswith("- **yarn** vs rope: ") and "3 seeds" in md[4]
    assert any(line.startswith("## Zero-shot vs continued") for line in md)
    html = layout.comparison_md.with_suffix(".html").read_text()
    assert "data:image/png;base64," in html and 'src="plots/' not in html
    csv = pd.read_csv(layout.results_csv).set_index("tag")
    assert (csv.loc[tags, "extension_bpb_n_units"] > 0).all()
    assert csv.loc["smoke-yarn-seed2", "compared_with"] == "rope"
    assert csv.loc["smoke-yarn-zeroshot", "compared_with"] == "rope (zero-shot)"
