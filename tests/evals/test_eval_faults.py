"""Multi-process evals under faults (2 CPU ranks under torchrun, gloo, the tiny model): killing an eval leaves no
process and the previous eval.json intact; two 2-process evals at once both finish (no port clash, no lost result)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rlab.paths import ExperimentLayout
from tests.cli.harness import processes_mentioning, run_process, start_process
from tests.conftest import default_sigint
from tests.evals.test_runner import TAG, make_base
from tests.orchestrate.helpers import spec_args

pytestmark = pytest.mark.slow

QUICK = "name: ev\nbase: {tag: d2}\neval: {evals: [bpb], bpb_tokens: 1024}\n"
LONG = (
    "name: ev\nbase: {tag: d2}\n"
    "eval: {evals: [bpb, passkey], bpb_tokens: 1024, passkey_trials: 2000, passkey_depths: [0.0, 0.5], "
    "lengths: [256, 512]}\n"
)


def _args(spec: Path, base: Path, results: Path, tag: str = TAG) -> list[str]:
    return [
        "eval",
        "--tag",
        tag,
        *spec_args(spec, base, results),
        "--nproc",
        "2",
    ]


@pytest.fixture
def evaluated(tiny_base_dir, tmp_path):
    """A base with a tiny checkpoint, evaluated once (the eval.json a killed re-run must not lose)."""
    base, results = make_base(tiny_base_dir, tmp_path), tmp_path / "results"
    quick, long = tmp_path / "quick.yaml", tmp_path / "long.yaml"
    quick.write_text(QUICK)
    long.write_text(LONG)
    done = run_process(*_args(quick, base, results), timeout=300)
    assert done.code == 0, done.err[-3000:]
    layout = ExperimentLayout(results, "ev")
    return base, results, long, layout, layout.eval_json(TAG).read_bytes()


def _start(args: list[str]) -> subprocess.Popen:
    return start_process(
        *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
    )


def _wait_for_workers(config: Path, count: int = 3, seconds: float = 120) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = processes_mentioning(str(config))
        if len(found) >= count:
            time.sleep(2)  # the workers are into their evals
            return found
        time.sleep(0.2)
    raise AssertionError(f"no eval workers for {config}")


def _gone(config: Path, seconds: float = 15) -> bool:
    deadline = time.time() + seconds
    while processes_mentioning(str(config)) and time.time() < deadline:
        time.sleep(0.2)
    return not processes_mentioning(str(config))


@pytest.mark.parametrize(
    "signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_stopping_a_2_process_eval_leaves_nothing_and_keeps_the_old_result(evaluated, signum, code):
    base, results, long, layout, before = evaluated
    proc = _start(_args(long, base, results))
    _wait_for_workers(layout.eval_run_config(TAG))  # torchrun and its two workers
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code and "Traceback" not in stderr, stderr[-2000:]
    assert f"Interrupted: the eval of {TAG} was stopped" in stderr and f"rlab eval --tag {TAG}" in stderr
    assert _gone(layout.eval_run_config(TAG))
    assert layout.eval_json(TAG).read_bytes() == before


def test_sigkill_of_rlab_or_of_the_agent_leaves_no_eval_worker(evaluated):
    base, results, long, layout, before = evaluated
    config = layout.eval_run_config(TAG)
    proc = _start(_args(long, base, results))
    _wait_for_workers(config)
    proc.kill()  # rlab itself: its job dies with it (lifeline), the workers with the agent
    proc.wait(timeout=30)
    assert _gone(config)
    assert layout.eval_json(TAG).read_bytes() == before
    proc = _start(_args(long, base, results))
    (agent,) = [
        p
        for p in _wait_for_workers(config)
        if Path(Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[1].decode()).name == "torchrun"
    ]
    os.kill(agent, signal.SIGKILL)  # the agent alone: the workers die with it, rlab reports and exits
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert _gone(config, seconds=1)  # already gone when rlab exits
    assert layout.eval_json(TAG).read_bytes() == before


def test_two_2_process_evals_at_once_both_finish(tiny_base_dir, tmp_path):
    base, results = make_base(tiny_base_dir, tmp_path), tmp_path / "results"
    shutil.copytree(base / "base_checkpoints" / TAG, base / "base_checkpoints" / "d2-twin")
    spec = tmp_path / "spec.yaml"
    spec.write_text(LONG.replace("passkey_trials: 2000", "passkey_trials: 40"))
    first, second = _start(_args(spec, base, results)), _start(_args(spec, base, results, "d2-twin"))
    outs = [p.communicate(timeout=600) for p in (first, second)]
    for proc, (_, stderr) in zip((first, second), outs):
        assert proc.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    layout = ExperimentLayout(results, "ev")
    for tag in (TAG, "d2-twin"):
        doc = json.loads(layout.eval_json(tag).read_text())
        assert doc["tag"] == tag and {"bpb", "passkey"} <= set(doc["metrics"])
        assert "--standalone" in layout.eval_log(tag).read_text()  # torchrun picked its own free port
