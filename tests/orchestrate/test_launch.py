"""Running jobs: failure isolation, disjoint devices, Ctrl-C leaves no process behind; metrics tailing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlab.orchestrate.launch import Job, format_command, run_jobs, run_streaming
from rlab.orchestrate.watch import MetricsTail, progress_table, tail_lines
from tests.conftest import default_sigint

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_failing_job_does_not_stop_the_others(tmp_path):
    metrics = tmp_path / "ok" / "metrics.jsonl"
    write_metrics = (
        "import json,sys,time\n"
        "with open(sys.argv[1], 'w') as f:\n"
        "    for s in range(1, 4): f.write(json.dumps({'type': 'train', 'step': s, 'end_step': 3, 'loss': 5.0 - s,"
        " 'tokens_per_s': 100.0, 'time': time.time()}) + '\\n')\n"
        "    f.write(json.dumps({'type': 'done', 'step': 3, 'time': time.time()}) + '\\n')\n"
        "print('trained')\n"
    )
    jobs = [
        Job(
            "x-bad",
            "bad",
            (PY, "-c", "import sys; print('boom'); sys.exit(3)"),
            tmp_path / "bad" / "train.log",
        ),
        Job("x-ok", "ok", (PY, "-c", write_metrics, str(metrics)), tmp_path / "ok" / "train.log", metrics),
    ]
    ticks = []
    states = run_jobs(jobs, on_tick=lambda s: ticks.append([x.state for x in s]), poll_s=0.05)
    assert [(s.state, s.returncode) for s in states] == [("failed", 3), ("done", 0)]
    assert tail_lines(jobs[0].log)[-1] == "boom"
    assert tail_lines(jobs[0].log)[0].startswith("# rlab: ")
    assert ticks[-1] == ["failed", "done"]
    progress = MetricsTail(metrics).poll()
    assert (progress.step, progress.end_step, progress.loss, progress.finished) == (3, 3, 2.0, "done")
    table = progress_table(states, {"x-ok": progress})
    assert table.row_count == 2


def test_concurrent_jobs_get_disjoint_devices(tmp_path):
    show = "import os; print('devices=' + os.environ['CUDA_VISIBLE_DEVICES'])"
    jobs = [Job(f"t{i}", f"v{i}", (PY, "-c", show), tmp_path / f"t{i}.log", env={"A": "1"}) for i in range(3)]
    states = run_jobs(jobs, [("0", "1"), ("2", "3")], poll_s=0.05)
    assert all(s.state == "done" for s in states)
    seen = [tail_lines(j.log)[-1] for j in jobs]
    assert seen[0] == "devices=0,1" and seen[1] == "devices=2,3" and seen[2] in ("devices=0,1", "devices=2,3")
    assert [s.devices for s in states][:2] == [("0", "1"), ("2", "3")]
    assert format_command(["torchrun", "-m", "a b"], {"X": "1 2"}) == "X='1 2' torchrun -m 'a b'"


DRIVER = """
import sys
from pathlib import Path
from rlab.orchestrate.launch import Job, run_jobs
tmp = Path(sys.argv[1])
child = ("import os, subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']);"
         " open(sys.argv[1], 'w').write(f'{os.getpid()} {p.pid}'); time.sleep(300)")
jobs = [Job(f"t{i}", "v", (sys.executable, "-c", child, str(tmp / f"pids{i}")), tmp / f"log{i}") for i in range(3)]
try:
    run_jobs(jobs, [None, None], poll_s=0.05, grace_s=5)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_terminates_every_process_group(tmp_path):
    driver = subprocess.Popen(
        [PY, "-c", DRIVER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
        preexec_fn=default_sigint,
    )
    deadline = time.time() + 300  # a hang guard, not a timing
    while not all((tmp_path / f"pids{i}").exists() for i in range(2)) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    pids = [int(p) for i in range(2) for p in (tmp_path / f"pids{i}").read_text().split()]
    assert all(_alive(p) for p in pids)
    driver.send_signal(signal.SIGINT)
    out, _ = driver.communicate(timeout=30)
    assert driver.returncode == 130 and "interrupted" in out
    time.sleep(0.2)
    assert [p for p in pids if _alive(p)] == []  # launchers and their children (the "workers") are all gone
    assert not (tmp_path / "pids2").exists()  # the queued third job never started


def test_run_streaming_tees_output(tmp_path):
    lines = []
    code = run_streaming(
        [PY, "-c", "print('a'); print('b'); raise SystemExit(2)"], tmp_path / "e.log", on_line=lines.append
    )
    assert code == 2 and lines == ["a", "b"]
    assert tail_lines(tmp_path / "e.log", 2) == ["a", "b"]


def test_metrics_tail_is_incremental_and_tolerates_partial_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.poll().step is None  # no file yet
    rec = {
        "type": "train",
        "step": 101,
        "start_step": 100,
        "end_step": 200,
        "loss": 3.5,
        "tokens_per_s": 1e4,
        "time": 1000.0,
    }
    with open(path, "w") as f:
        f.write(json.dumps(rec) + "\n")
        f.write(json.dumps({**rec, "step": 111, "loss": 3.0, "time": 1010.0})[:20])  # half-written line
    p = tail.poll()
    assert (p.step, p.loss, p.eta_s) == (101, 3.5, None)
    with open(path, "a") as f:
        f.write(json.dumps({**rec, "step": 111, "loss": 3.0, "time": 1010.0})[20:] + "\n")
        f.write(json.dumps({"type": "eval", "step": 111, "val_bpb": 1.25}) + "\n")
    p = tail.poll()
    assert (p.step, p.loss, p.val_bpb) == (111, 3.0, 1.25)
    assert p.eta_s == pytest.approx(89 * 1.0)  # 10 steps in 10 s, 89 to go
    with open(path, "a") as f:
        f.write(json.dumps({"type": "failed", "step": 111, "error": "nan", "time": 1011.0}) + "\n")
    assert (tail.poll().finished, tail.progress.error) == ("failed", "nan")
    assert os.path.getsize(path) == tail.offset
