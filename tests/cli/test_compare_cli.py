"""`rlab compare A B`: two experiments in one report, through the real console entry point.

Both experiments are copies of the report fixture `fx` (tests/report/fixtures): `fy` is `fx` with its yarn
tag scoring 3% fewer nats on every unit, so fy/yarn is better than fx/yarn and every other pair is identical.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.cli.harness import assert_clean_error, run_main
from tests.report.conftest import FIXTURES

BOOT = ("--bootstrap", "200")


def _scale_nats(path: Path, factor: float) -> None:
    frame = pd.read_csv(path)
    frame["nats"] = frame["nats"] * factor
    frame.to_csv(path, index=False)


def _edit_eval(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(FIXTURES / "fx", root / "fx")
    shutil.copytree(FIXTURES / "fx", root / "fy")
    _scale_nats(root / "fy" / "evals" / "fx-yarn" / "bpb_units.csv", 0.97)
    return root


def test_compare_pairs_each_arm_with_the_same_arm_of_the_first(root):
    single = root / "fx" / "comparison.md"
    outcome = run_main("compare", "fx", "fy", "--results-dir", str(root), "--format", "html", *BOOT)
    assert outcome.code == 0 and outcome.exception is None, outcome.text
    text = " ".join(outcome.out.split())
    assert "fy/yarn vs fx/yarn" in text and "better than fx/yarn" in text
    assert "fy/pi vs fx/pi" in text and "no verdict: untestable" in text  # identical evals: nothing to test
    out = root / "_compare" / "fx+fy"
    md = (out / "comparison.md").read_text()
    assert md.startswith("# Comparison: `fx` vs `fy`") and "| metric | fy/pi − fx/pi |" in md
    assert "Estimates per arm (unpaired)" in md and "fx/rope" in md
    assert (out / "plots" / "bpb_difference_vs_length.png").is_file()
    assert 'src="data:image/png;base64,' in (out / "comparison.html").read_text()
    assert not single.exists()  # a single experiment's report is never written or overwritten


def test_compare_json_arms_and_baseline(root):
    outcome = run_main("compare", "fx", "fy", "--results-dir", str(root), "--arms", "yarn", "--json", *BOOT)
    assert outcome.code == 0, outcome.text
    doc = json.loads(outcome.out)
    pairs = {(c["arm"], c["reference"]) for c in doc["comparisons"]}
    assert pairs == {("fy/yarn", "fx/yarn")} and doc["pairing"] == "by arm"
    primary = next(c for c in doc["comparisons"] if c["metric"] == "extension_bpb")
    assert primary["verdict"] == "better" and primary["diff_high"] < 0 and primary["n_units"] == 24
    outcome = run_main(
        "compare", "fx", "fy", "--results-dir", str(root), "--baseline", "FX/Rope", "--json", *BOOT
    )
    doc = json.loads(outcome.out)
    assert doc["pairing"] == "baseline" and {c["reference"] for c in doc["comparisons"]} == {"fx/rope"}
    assert {c["arm"] for c in doc["comparisons"]} == {"fx/pi", "fx/yarn", "fy/pi", "fy/rope", "fy/yarn"}


def test_cross_experiment_eval_differences_are_not_paired(root):
    """fy's val/train BPB scored with other settings: no paired estimate there, a named warning; CORE still paired."""

    def other_bpb(doc):
        doc["measured"]["bpb"]["settings"]["bpb_tokens"] = 999
        doc["measured"]["bpb"]["settings_hash"] = "000000000000"

    _edit_eval(root / "fy" / "evals" / "fx-yarn" / "eval.json", other_bpb)
    outcome = run_main("compare", "fx", "fy", "--results-dir", str(root), "--arms", "yarn", "--json", *BOOT)
    assert outcome.code == 0, outcome.text
    doc = json.loads(outcome.out)
    by = {c["metric"]: c for c in doc["comparisons"]}
    assert by["val_bpb"]["verdict"] == "not comparable" and by["val_bpb"]["diff"] is None
    assert by["val_bpb"]["p_value"] is None  # out of the Holm family
    assert by["extension_bpb"]["verdict"] == "better"  # BPB vs length was measured alike
    assert any("bpb_tokens: 999 vs 4096" in m for m in doc["mismatches"])


def test_compare_refuses_when_nothing_is_comparable(root):
    def other_data(doc):
        for run in doc["measured"].values():
            run["data_hash"] = "ffffffffffff"

    for tag in ("fx-rope", "fx-pi", "fx-yarn"):
        _edit_eval(root / "fy" / "evals" / tag / "eval.json", other_data)
    outcome = run_main("compare", "fx", "fy", "--results-dir", str(root), *BOOT)
    assert_clean_error(outcome, "Nothing comparable across the experiments", "eval data")
    assert not (root / "_compare").exists()


def test_training_differences_are_reported_not_blocking(root):
    def longer(doc):
        doc["checkpoint"]["step"] = 20
        doc["checkpoint"]["tokens_trained"] = 10240

    _edit_eval(root / "fy" / "evals" / "fx-yarn" / "eval.json", longer)
    outcome = run_main("compare", "fx", "fy", "--results-dir", str(root), "--arms", "yarn", "--json", *BOOT)
    doc = json.loads(outcome.out)
    assert any("step 20 vs 10" in n for n in doc["training_differences"])
    assert next(c for c in doc["comparisons"] if c["metric"] == "extension_bpb")["verdict"] == "better"


@pytest.mark.parametrize(
    "args, fragments",
    [
        (("fx", "nope"), ("Unknown experiment", "'nope'")),
        (("fx",), ("at least two experiments",)),
        (("fx", "fx"), ("named twice",)),
        (("fx", "fy", "--baseline", "llama3"), ("Unknown baseline arm 'llama3'", "in none of fx, fy")),
        (("fx", "fy", "--arms", "yarm"), ("Unknown arm 'yarm'", "Did you mean 'yarn'")),
        (("fx", "empty"), ("'empty' has no evals yet", "rlab eval --all -e empty")),
    ],
)
def test_bad_input_is_one_clear_error(root, args, fragments):
    (root / "empty" / "runs" / "empty-rope").mkdir(parents=True)
    outcome = run_main("compare", *args, "--results-dir", str(root), *BOOT)
    assert_clean_error(outcome, *fragments)


def test_compare_takes_spec_files(root, tmp_path):
    specs = []
    for name in ("fx", "fy"):
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(f"name: {name}\nresults_dir: {root}\nbase:\n  tag: {name}\n")
        specs.append(str(spec))
    outcome = run_main("compare", *specs, "-q", *BOOT)
    assert outcome.code == 0, outcome.text
    assert (root / "_compare" / "fx+fy" / "comparison.md").is_file()
    missing = run_main("compare", specs[0], str(tmp_path / "nope.yaml"))
    assert_clean_error(missing, "Spec file not found")
