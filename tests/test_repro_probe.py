"""experiments/probes/repro.py: it reruns the demo's continue/eval/report in the other dtype and counts verdict changes."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from rlab.errors import RlabError
from rlab.paths import ExperimentLayout
from rlab.spec.loading import load_spec
from tests.conftest import load_probe

REPO = Path(__file__).resolve().parents[1]
DEMO_YAML = REPO / "experiments" / "demo.yaml"


def test_the_rerun_is_the_demo_as_its_own_experiment_in_the_other_dtype(tmp_path):
    probe = load_probe("repro")
    demo = yaml.safe_load(DEMO_YAML.read_text())
    spec = probe.rerun_spec(demo, probe.NAME, "float32")
    assert demo["name"] == "demo" and demo["train"]["dtype"] == "auto"  # the demo's own spec untouched
    assert spec["name"] == "demo-repro" and spec["train"]["dtype"] == "float32"
    path = tmp_path / "repro.yaml"
    path.write_text(yaml.safe_dump(spec))
    loaded = load_spec(path, base_dir=tmp_path / "base", results_dir=tmp_path / "res")
    assert (
        loaded.tag_for("pi") == "demo-demo-repro-pi" and loaded.base.tag == "demo"
    )  # its own tags, the demo's base
    stages = probe.rerun_stages(path, tmp_path / "base", tmp_path / "res")
    assert [s.name for s in stages] == ["continue", "eval", "report"]
    assert all(str(path) in s.argv for s in stages)
    assert probe.OTHER_DTYPE[probe.OTHER_DTYPE["float32"]] == "float32"


def test_the_reference_must_come_from_the_same_spec(tmp_path):
    probe = load_probe("repro")
    reference = ExperimentLayout(tmp_path, "demo")
    with pytest.raises(RlabError, match="No demo results"):
        probe.check_reference(reference, DEMO_YAML)
    reference.root.mkdir()
    ran = yaml.safe_load(DEMO_YAML.read_text())
    ran["train"]["seeds"] = 1
    reference.resolved_spec.write_text(yaml.safe_dump(ran))
    with pytest.raises(RlabError, match="seeds 1 vs 2"):
        probe.check_reference(reference, DEMO_YAML)
    reference.resolved_spec.write_text(DEMO_YAML.read_text())
    probe.check_reference(reference, DEMO_YAML)


def test_count_only_prints_each_change_and_a_json_line(tmp_path, capsys):
    for name in ("demo", "demo-repro"):  # two copies of the committed demo's outputs
        shutil.copytree(REPO / "results" / "demo" / "evals", tmp_path / name / "evals")
        shutil.copy(REPO / "results" / "demo" / "results.csv", tmp_path / name / "results.csv")
    path = tmp_path / "demo-repro" / "results.csv"
    rows = list(csv.DictReader(path.open()))
    column = next(c for c in rows[0] if c.startswith("bpb_len_2048_verdict_vs_"))
    for row in rows:  # every tag of the arm (its seeds) carries the arm's verdict
        if row["arm"] == "pi":
            row[column] = "worse" if row[column] != "worse" else "≈ within noise"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert load_probe("repro").main(["--results-dir", str(tmp_path), "--count-only"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    report = json.loads(lines[-1])
    assert (
        report["changed"] == 1 and report["changed_to_or_from_better_worse"] == 1 and report["compared"] > 100
    )
    assert report["conditions"]["demo"]["threads"] in ([], [1]) and report["seconds"] == {}
    assert report["conditions"]["demo-repro"]["train_dtypes"] == ["bfloat16"]  # every dtype found, not one
    assert lines[0].startswith("demo -> demo-repro: 1 of ") and lines[1].startswith("  pi bpb_len_2048 vs ")
