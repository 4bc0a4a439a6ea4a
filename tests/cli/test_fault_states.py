"""How `rlab ls`, `status` and `report` show the ends of a run that are not `done` (issue 42): a diverged run, a
stalled one, an eval.json that cannot be read (never a silent drop), a run.json that is not UTF-8."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rlab.orchestrate.lock import TagLocks
from rlab.paths import BaseLayout, ExperimentLayout
from rlab.records.heartbeat import Heartbeat
from tests.cli.harness import run_main
from tests.cli.test_fuzz import assert_no_traceback
from tests.cli.test_ls_status import _tree


def _states(base: Path, results: Path, command: str = "ls") -> dict[str, dict]:
    done = run_main(command, "--base-dir", str(base), "--results-dir", str(results), "--json")
    assert done.code == 0, done.text
    payload = json.loads(done.out)
    return {r["tag"]: r for r in payload["tags" if command == "ls" else "runs"]}


def _end_run(results: Path, tag: str, record: dict) -> None:
    metrics = ExperimentLayout(results, "fx").metrics_file(tag)
    lines = [ln for ln in metrics.read_text().splitlines() if '"done"' not in ln]
    metrics.write_text("\n".join([*lines, json.dumps(record)]) + "\n")


def _report(results: Path):
    done = run_main("report", "-e", "fx", "--results-dir", str(results), "--format", "md", columns=400)
    assert_no_traceback(done)
    return done


def test_a_diverged_run_is_diverged_in_ls_and_status_and_left_out_of_the_report(tmp_path):
    """Finding 3: a dead arm was `done`. Now ls/status say diverged and the report leaves it out with a note."""
    base, results = _tree(tmp_path)
    error = "Stopped fx-pi at step 9: diverged (5 steps in a row since step 5; last: grad norm exactly 0)"
    _end_run(results, "fx-pi", {"type": "failed", "step": 9, "error": error, "kind": "diverged", "time": 1.0})
    assert _states(base, results)["fx-pi"]["state"] == "diverged"
    assert _states(base, results, "status")["fx-pi"]["error"] == error
    shown = run_main("status", "--base-dir", str(base), "--results-dir", str(results), columns=300)
    assert f"fx-pi: diverged ({error})" in shown.out
    report = _report(results)
    assert report.code == 0, report.err
    assert "left out: fx-pi, its run diverged at step 9" in " ".join(report.out.split())
    rows = ExperimentLayout(results, "fx").results_csv.read_text()
    assert "fx-pi" not in rows and "fx-rope" in rows


def test_a_corrupt_eval_json_is_named_in_ls_and_report_never_silently_dropped(tmp_path):
    """Finding 7: `report` rewrote results.csv without the tag, exit 0, while `ls` said "evaluated"."""
    base, results = _tree(tmp_path)
    layout = ExperimentLayout(results, "fx")
    layout.eval_json("fx-pi").write_text('{"schema": ')
    record = _states(base, results)["fx-pi"]
    assert record["state"] == "eval unreadable" and str(layout.eval_json("fx-pi")) in record["error"]
    report = _report(results)
    assert report.code == 0, report.err
    assert "left out: fx-pi, eval.json unreadable" in " ".join(report.out.split())


def test_a_run_json_that_is_not_utf8_is_a_note_not_a_traceback(tmp_path):
    """Finding 7: `rlab report` printed a UnicodeDecodeError traceback (report/sources/tag_files.py)."""
    _, results = _tree(tmp_path)
    run_json = ExperimentLayout(results, "fx").run_config("fx-rope")
    run_json.write_bytes(b'{"tag": "fx-rope\xff\xfe"}')
    report = _report(results)
    assert report.code == 0 and "run.json is unreadable (UnicodeDecodeError)" in " ".join(report.out.split())


def test_status_says_stalled_since_with_the_rank_and_its_step(tmp_path):
    """Finding 1: `rlab status` kept saying `training 40/80` while a rank was frozen. A running job whose rank is
    silent past the watchdog's bound, and a job the watchdog stopped, both read `stalled since HH:MM (rank 1 at
    step 40)`."""
    base, results = _tree(tmp_path)
    beats = ExperimentLayout(results, "fx").heartbeat_dir("fx-pi")
    beats.mkdir(parents=True)
    now = time.time()
    for rank, last in ((0, now), (1, now - 400)):
        beat = Heartbeat(
            rank=rank, pid=1, step=40, step_time=last, slowest_s=2.0, stall_timeout_s=300, time=last
        )
        (beats / f"rank{rank}.json").write_text(beat.model_dump_json())
    since = time.strftime("%H:%M", time.localtime(now - 400))
    with TagLocks(BaseLayout(base), ["fx-pi"]):  # the job still runs
        shown = run_main("status", "--base-dir", str(base), "--results-dir", str(results), columns=300)
    assert f"fx-pi: stalled since {since} (rank 1 at step 40)" in shown.out, shown.out
    _end_run(
        results,
        "fx-pi",
        {
            "type": "failed",
            "step": 40,
            "error": f"stalled since {since} (rank 1 at step 40)",
            "kind": "stalled",
        }
        | {"time": now},
    )
    assert _states(base, results)["fx-pi"]["state"] == "stalled"
    shown = run_main("status", "--base-dir", str(base), "--results-dir", str(results), columns=300)
    assert f"fx-pi: stalled since {since} (rank 1 at step 40); log" in shown.out, shown.out
