"""`rlab eval` and `rlab ls` through the real entry point (the real eval run is in the continue e2e test)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rlab.paths import BaseLayout, ExperimentLayout, meta_file
from tests.cli.harness import assert_user_error, run_main
from tests.orchestrate.helpers import EXPERIMENTS, make_checkpoint, spec_args


def test_eval_needs_a_tag():
    assert_user_error(run_main("eval"), "rlab eval needs --tag TAG", "rlab ls")


def test_eval_unknown_tag_suggests(tmp_path):
    make_checkpoint(tmp_path / "base", "d20-yarn")
    assert_user_error(
        run_main("eval", "--tag", "d20-yarm", "--base-dir", str(tmp_path / "base")),
        "Unknown tag 'd20-yarm'. Did you mean 'd20-yarn'?",
    )
    assert_user_error(
        run_main("eval", "--tag", "d20-yarn", "--step", "3", "--base-dir", str(tmp_path / "base")),
        "No checkpoint for step 3",
        "(found: 10)",
    )


def test_eval_dry_run_plans_with_flags(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(base, "demo-yarn")
    results = tmp_path / "res"
    common = [
        *spec_args(EXPERIMENTS / "demo.yaml", base, results),
        "--dry-run",
    ]
    result = run_main(
        "eval",
        "--tag",
        "demo-yarn",
        *common,
        "--no-core",
        "--lengths",
        "256,1024",
        "--max-per-task",
        "3",
        "--nproc",
        "1",
    )
    assert result.code == 0, result.err
    layout = ExperimentLayout(results, "demo")
    readable = [
        line for line in result.out.splitlines() if line.strip()
    ]  # the plan in words, then the command
    assert readable[0].startswith(f"demo-yarn (newest step in {base}) -> {layout.eval_dir('demo-yarn')}")
    assert "evals: bpb_length, passkey, copy_distance; lengths: 256, 1,024" in readable[1]
    command = readable[-1]
    as_json = run_main("eval", "--tag", "demo-yarn", *common, "--no-core", "--lengths", "256,1024",
                       "--max-per-task", "3", "--nproc", "1", "--json")  # fmt: skip
    cfg = json.loads(as_json.out)["tags"][0]["config"]
    assert (cfg["tag"], cfg["variant"], cfg["out_dir"]) == (
        "demo-yarn",
        "yarn",
        str(layout.eval_dir("demo-yarn")),
    )
    assert cfg["eval"]["evals"] == ["bpb_length", "passkey", "copy_distance"] and cfg["eval"]["lengths"] == [
        256,
        1024,
    ]
    assert cfg["eval"]["max_per_task"] == 3
    assert command.strip() == f"{sys.executable} -m rlab.evals {layout.eval_run_config('demo-yarn')}"
    multi = run_main(
        "eval", "--all", *common
    )  # demo.yaml: 2 processes -> torchrun; --all finds the one trained tag
    lines = [line.strip() for line in multi.out.splitlines() if "rlab.evals" in line]
    assert len(lines) == 1 and "--nproc-per-node=2" in lines[0] and "--standalone" in lines[0]
    assert not results.exists()


def test_ls_shows_steps_lineage_rope_and_evals(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(base, "d20", steps=(21400,))
    ckpt = make_checkpoint(base, "d20-yarn", steps=(21400, 21500, 21600, 21700, 21800))
    meta = json.loads(meta_file(ckpt, 21800).read_text())
    meta.update(
        lineage={"parent_tag": "d20", "parent_step": 21400},
        rope={"variant": "yarn", "factor": 4, "original_len": 2048},
    )
    meta_file(ckpt, 21800).write_text(json.dumps(meta))
    layout = ExperimentLayout(tmp_path / "res", "rope")
    layout.eval_json("d20-yarn").parent.mkdir(parents=True)
    fixture = Path(__file__).parents[1] / "report" / "fixtures" / "fx" / "evals" / "fx-pi" / "eval.json"
    layout.eval_json("d20-yarn").write_bytes(
        fixture.read_bytes()
    )  # an eval.json that reads (else: unreadable)
    result = run_main("ls", "--base-dir", str(base), "--results-dir", str(tmp_path / "res"))
    assert result.code == 0, result.err
    row = next(line for line in result.out.splitlines() if "d20-yarn" in line)
    for fragment in ("evaluated", "21800", "yarn(s=4, L0=2048, beta=32/1)"):
        assert fragment in row, row
    record = next(
        r
        for r in json.loads(
            run_main("ls", "--base-dir", str(base), "--results-dir", str(tmp_path / "res"), "--json").out
        )["tags"]
        if r["tag"] == "d20-yarn"
    )
    assert record["steps"] == [21400, 21500, 21600, 21700, 21800] and record["from"] == "d20@21400"
    assert record["state"] == "evaluated" and list(record["evals"]) == ["rope"]
    assert BaseLayout(base).checkpoint_dir("d20").exists()
