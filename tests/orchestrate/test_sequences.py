"""The continue and eval sequences of `rlab.orchestrate` run without the CLI, behind a reporter.

A stand-in "torchrun" (a real shell script set as launch.torchrun) makes the whole training sequence
run in a second: clone -> lock -> launch -> watch, reported as JSON events or not at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlab.errors import LaunchError
from rlab.orchestrate.eval_plan import EvalRequest
from rlab.orchestrate.launch import with_default_nproc
from rlab.orchestrate.preflight import preflight_continue
from rlab.orchestrate.reporter import JsonReporter, SilentReporter
from rlab.orchestrate.training import start_continue
from rlab.paths import BaseLayout, ExperimentLayout
from rlab.spec.loading import load_spec
from tests.cli.harness import run_main
from tests.orchestrate.helpers import continue_from, fake_torchrun, make_checkpoint, spec_args, write_spec


@pytest.fixture
def setup(tmp_path):
    make_checkpoint(tmp_path / "base", "d20", steps=(20,))
    return BaseLayout(tmp_path / "base"), tmp_path / "res"


def _preflight(tmp_path: Path, base: BaseLayout, results: Path, fail_on: str | None = None, **flags):
    spec_file = write_spec(
        tmp_path, f"name: seq\nlaunch: {{torchrun: {fake_torchrun(tmp_path, fail_on=fail_on)}}}\n"
    )
    spec = load_spec(spec_file, base_dir=base.root, results_dir=results, from_step=20, **flags)
    return preflight_continue(with_default_nproc(spec, []))


def test_the_training_sequence_reports_json_events(setup, tmp_path):
    base, results = setup
    reporter = JsonReporter()
    states = start_continue(
        _preflight(tmp_path, base, results, variants="pi,yarn"), resume=False, force=False, reporter=reporter
    )
    assert [s.state for s in states] == ["done", "done"]
    kinds = [e["event"] for e in reporter.events]
    assert kinds[-2:] == ["summary", "next"] and "progress" in kinds
    texts = [e.get("text", "") for e in reporter.events]
    assert "d20-seq-pi: cloned from d20@20" in texts and "d20-seq-yarn: cloned from d20@20" in texts
    summary = reporter.events[-2]["jobs"]
    assert [(j["tag"], j["state"], j["exit"]) for j in summary] == [
        ("d20-seq-pi", "done", 0),
        ("d20-seq-yarn", "done", 0),
    ]
    assert (
        reporter.events[-1]["command"].startswith("rlab eval --spec ")
        and "--all" in reporter.events[-1]["command"]
    )
    json.dumps(reporter.events)  # every event is JSON as it is


def test_a_failed_job_is_raised_with_its_own_reason_and_reported(setup, tmp_path):
    base, results = setup
    reporter = JsonReporter()
    pf = _preflight(tmp_path, base, results, fail_on="d20-seq-ntk", variants="ntk")
    with pytest.raises(LaunchError) as caught:
        start_continue(pf, resume=False, force=False, reporter=reporter)
    assert "d20-seq-ntk: Refusing to save step 3: non-finite parameters" in caught.value.message
    assert "--variants ntk --resume" in (caught.value.hint or "")
    failed = [e for e in reporter.events if e["event"] == "failed"]
    assert len(failed) == 1 and failed[0]["exit"] == 1 and "worker crashed: CUDA error" in failed[0]["tail"]


def test_the_silent_reporter_prints_nothing(setup, tmp_path, capfd):
    base, results = setup
    start_continue(
        _preflight(tmp_path, base, results, variants="pi"),
        resume=False,
        force=False,
        reporter=SilentReporter(),
    )
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert ExperimentLayout(results, "seq").train_log("d20-seq-pi").exists()


def test_continue_json_streams_one_json_object_per_event(setup, tmp_path):
    base, results = setup
    spec_file = write_spec(tmp_path, f"name: seq\nlaunch: {{torchrun: {fake_torchrun(tmp_path)}}}\n")
    outcome = run_main(
        "continue",
        *spec_args(spec_file, base.root, results),
        *continue_from(20, "pi"),
        "--json",
    )
    assert outcome.code == 0 and outcome.exception is None, outcome.text
    events = [json.loads(line) for line in outcome.out.splitlines()]  # stdout is JSON lines only
    assert {"event": "info", "text": "d20-seq-pi: cloned from d20@20"} in events
    assert events[-1]["event"] == "next" and "warning" in [e["event"] for e in events]  # fake model file


def test_the_eval_rerun_command_is_the_request_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    request = EvalRequest(
        tag="d20-pi",
        spec_path=Path("specs/x.yaml"),
        results_dir=Path("res"),
        switches={"core": False, "bpb_length": True, "ruler": None},
        lengths=[256, 512],
        nproc=2,
    )
    assert request.rerun_command("d20-yarn") == (
        f"rlab eval --tag d20-yarn --spec {tmp_path}/specs/x.yaml --results-dir {tmp_path}/res --nproc 2 "
        "--bpb-length --no-core --lengths 256,512"
    )
