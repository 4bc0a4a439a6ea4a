"""`rlab ls` and `rlab status` on a real results tree (the report fixture `fx`) and real tag locks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rich.console import Console

from rlab.cli.tag_view import records_table
from rlab.orchestrate.lock import TagLocks
from rlab.orchestrate.tag_state import tag_records
from rlab.paths import BaseLayout
from tests.cli.harness import run_main
from tests.orchestrate.helpers import continue_from, launcher_spec, make_checkpoint

FX = Path(__file__).resolve().parents[1] / "report" / "fixtures" / "fx"


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    base, results = tmp_path / "base", tmp_path / "results"
    shutil.copytree(FX, results / "fx")
    for tag in ("fx-rope", "fx-pi", "fx-ntk", "fx-yarn"):
        make_checkpoint(base, tag, steps=(10,))
    make_checkpoint(base, "fx-base", steps=(20,))
    metrics = results / "fx" / "runs" / "fx-yarn" / "metrics.jsonl"
    metrics.write_text(
        metrics.read_text().replace('"type": "done"', '"type": "failed", "error": "loss is NaN"')
    )
    return base, results


def test_ls_shows_state_length_and_metrics(tmp_path):
    base, results = _tree(tmp_path)
    outcome = run_main("ls", "--base-dir", str(base), "--results-dir", str(results), "--json")
    assert outcome.code == 0, outcome.text
    tags = {r["tag"]: r for r in json.loads(outcome.out)["tags"]}
    assert tags["fx-rope"]["state"] == "evaluated" and tags["fx-rope"]["metrics"]["val_bpb"] > 0
    assert tags["fx-ntk"]["state"] == "stopped"  # a torn metrics.jsonl, no done record, no lock
    assert tags["fx-yarn"]["state"] == "failed" and tags["fx-yarn"]["error"] == "loss is NaN"
    assert tags["fx-base"]["state"] == "base" and tags["fx-base"]["seq_len"] == 256
    table = run_main("ls", "--base-dir", str(base), "--results-dir", str(results), columns=80)
    assert table.code == 0
    rows = [line for line in table.out.splitlines() if line.strip().startswith("fx-")]
    assert len(rows) == 5, table.out  # one line per tag at 80 columns
    assert all(len(line) <= 80 for line in rows), rows


def test_status_shows_live_and_unfinished_runs(tmp_path):
    base, results = _tree(tmp_path)
    with TagLocks(BaseLayout(base), ["fx-pi"]):  # the lock a running `rlab continue` job holds
        outcome = run_main("status", "--base-dir", str(base), "--results-dir", str(results), "--json")
    assert outcome.code == 0, outcome.text
    runs = {r["tag"]: r["state"] for r in json.loads(outcome.out)["runs"]}
    assert runs == {"fx-pi": "training", "fx-ntk": "stopped", "fx-yarn": "failed"}
    text = run_main("status", "--base-dir", str(base), "--results-dir", str(results), columns=80)
    assert "fx-ntk: stopped" in text.out and "--resume" in text.out and "loss is NaN" in text.out
    quiet = run_main(
        "status", "--base-dir", str(tmp_path / "nobase"), "--results-dir", str(tmp_path / "none")
    )
    assert quiet.code == 0 and "Nothing running" in quiet.out


def test_ls_at_80_columns_never_cuts_a_number(tmp_path):
    """Long tags (zero-shot arms of a long experiment name): the RoPE column goes, every value stays whole."""
    base, results = _tree(tmp_path)
    for tag in ("fx-rope", "fx-pi", "fx-ntk", "fx-yarn"):
        make_checkpoint(base, f"{tag}-dynamic-zeroshot-seed2", steps=(10,))
    narrow = run_main("ls", "--base-dir", str(base), "--results-dir", str(results), columns=80)
    assert narrow.code == 0, narrow.err
    assert "rope" not in next(line for line in narrow.out.splitlines() if line.startswith("tag "))
    wide = Console(width=200, record=True)
    wide.print(records_table(tag_records(BaseLayout(base), results), 200))
    assert "rope" in wide.export_text().splitlines()[0]
    rows = [line for line in narrow.out.splitlines() if line.strip().startswith("fx-")]
    assert len(rows) == 9 and all(len(line) <= 80 for line in rows) and "…" not in narrow.out, narrow.out


def test_status_shows_a_run_stopped_before_its_first_step(tmp_path):
    """A run killed before its first step has no metrics.jsonl: status still shows it (stopped), never "Nothing
    running"."""
    base, results = tmp_path / "base", tmp_path / "results"
    make_checkpoint(base, "d20", steps=(20,))
    spec = launcher_spec(tmp_path, "st", "kill -9 $$\n", "train: {zero_shot: true}\n")  # gone before it logs
    common = ["--base-dir", str(base), "--results-dir", str(results)]
    launched = run_main("continue", "--spec", str(spec), *common, *continue_from(20, "pi"), "--no-control")
    assert launched.code == 1, launched.text
    assert not (results / "st" / "runs" / "d20-st-pi" / "metrics.jsonl").exists()
    outcome = run_main("status", *common, "--json")
    runs = {r["tag"]: r for r in json.loads(outcome.out)["runs"]}
    assert list(runs) == ["d20-st-pi"]  # the zero-shot arm is a clone, not a job
    assert runs["d20-st-pi"]["state"] == "stopped" and runs["d20-st-pi"]["step"] == 20
    text = " ".join(run_main("status", *common).out.split())
    assert "d20-st-pi: stopped (launched, stopped before its first step)" in text
    assert f"rlab continue --spec {results / 'st' / 'spec.resolved.yaml'} --variants pi --resume" in text


def test_status_shows_the_planned_length_of_a_run_that_never_stepped(tmp_path):
    """A clone killed before its first step still holds its base's checkpoint, meta and run config: its seq
    column is the length the run was launched to train at (its run.json), not the base's 256."""
    base, results = tmp_path / "base", tmp_path / "results"
    make_checkpoint(base, "d20", steps=(20,))
    meta = BaseLayout(base).checkpoint_dir("d20") / "meta_000020.json"
    trained = {**json.loads(meta.read_text()), "run_config": {"tag": "d20", "train": {"seq_len": 256}}}
    meta.write_text(json.dumps(trained))  # a base rlab pretrained: its own run config says 256
    spec = launcher_spec(tmp_path, "st", "kill -9 $$\n", "train: {seq_len: 1024}\n")
    common = ["--base-dir", str(base), "--results-dir", str(results)]
    launched = run_main("continue", "--spec", str(spec), *common, *continue_from(20, "pi"), "--no-control")
    assert launched.code == 1, launched.text
    outcome = run_main("status", *common, "--json")
    (run,) = json.loads(outcome.out)["runs"]
    assert (run["tag"], run["state"], run["step"], run["seq_len"]) == ("d20-st-pi", "stopped", 20, 1024)
    row = next(line for line in run_main("status", *common).out.splitlines() if "d20-st-pi" in line)
    assert "1024" in row.split() and "256" not in row.split()
    listed = {r["tag"]: r for r in json.loads(run_main("ls", *common, "--json").out)["tags"]}
    assert (listed["d20"]["seq_len"], listed["d20-st-pi"]["seq_len"]) == (256, 1024)  # the base keeps its own
