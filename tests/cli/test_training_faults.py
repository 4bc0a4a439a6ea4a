"""The faults a long GPU job meets, on 2 CPU ranks under torchrun (gloo) with the tiny smoke model.

Each test injects one failure (a killed agent, a full disk, fewer processes on resume) through the real CLI
and workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rlab.orchestrate.lock import lock_holder
from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps
from tests.cli.harness import processes_mentioning, run_process, start_process
from tests.orchestrate.helpers import pretrained_smoke_base, write_spec

pytestmark = pytest.mark.slow

LONG_RUN = """name: drill
base: {tag: smoke, step: 4}
train: {seq_len: 128, steps: 100000, device_batch_size: 2, eval_every: never, save_every: 2, keep_last: 3,
        eval_tokens: 1024, lr: {warmup_steps: 1}}
variants:
  pi: {variant: pi, factor: 4.0}
"""


def _start_continue(spec: Path, base: Path, results: Path, *extra: str) -> subprocess.Popen:
    args = ["continue", "--spec", str(spec), "--base-dir", str(base)]
    args += ["--results-dir", str(results), "--variants", "pi", "--nproc", "2", *extra]
    return start_process(
        *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _wait_for_training(layout: ExperimentLayout, tag: str, seconds: float = 240) -> None:
    deadline = time.time() + seconds
    metrics = layout.metrics_file(tag)
    while time.time() < deadline:
        if metrics.exists() and '"train"' in metrics.read_text():
            return
        time.sleep(0.5)
    raise AssertionError(f"{tag} never logged a step")


def _agent(run_json: Path) -> int:
    """The torchrun agent of a job (its program is torchrun; its workers run `-m rlab.core.train`)."""

    def program(pid: int) -> str:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return Path(argv[1].decode()).name if len(argv) > 1 else ""

    (agent,) = [p for p in processes_mentioning(str(run_json)) if program(p) == "torchrun"]
    return agent


def test_sigkill_of_the_torchrun_agent_alone_leaves_no_worker_and_no_later_checkpoint(
    tiny_base_dir, tmp_path
):
    """The OOM killer's choice: the agent dies, the workers (each in its own session) must not train on,
    and the tag's lock is free only once no process of the job is left."""
    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    results = tmp_path / "drill-results"
    layout, tag = ExperimentLayout(results, "drill"), "smoke-drill-pi"
    proc = _start_continue(write_spec(tmp_path, LONG_RUN), base_dir, results)
    try:
        _wait_for_training(layout, tag)
        assert len(processes_mentioning(str(layout.run_config(tag)))) == 3  # the agent and two workers
        os.kill(_agent(layout.run_config(tag)), signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1 and "Traceback" not in stderr
    assert "1 of 1 job(s) failed: smoke-drill-pi" in " ".join(stderr.split())
    # the moment rlab has exited (the lock with it), no process of the job is left ...
    assert processes_mentioning(str(layout.run_config(tag))) == []
    assert lock_holder(BaseLayout(base_dir), tag) is None
    steps = checkpoint_steps(BaseLayout(base_dir).checkpoint_dir(tag))
    time.sleep(3)
    # ... and nothing writes to the tag afterwards
    assert checkpoint_steps(BaseLayout(base_dir).checkpoint_dir(tag)) == steps
    records = [json.loads(line) for line in layout.metrics_file(tag).read_text().splitlines()]
    assert max(r.get("step", 0) for r in records) <= max(steps) + 2


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (needs root and a kernel that allows the mount; skipped elsewhere)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)]).returncode
    ):
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Take every free byte of the filesystem under `folder`."""
    filler = folder / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 20))
                fh.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_is_one_named_error_and_the_run_resumes_exactly_after(
    tiny_base_dir, tmp_path, small_disk
):
    """The disk fills while the job trains: the summary names rank 0's "No space left" and the file (not rank 1's
    "Connection closed by peer"), as text, without a traceback; freed, --resume goes on from the last checkpoint."""
    import shutil

    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    small_base = small_disk / "base"
    shutil.copytree(base_dir, small_base)
    results = tmp_path / "disk-results"
    layout, tag = ExperimentLayout(results, "drill"), "smoke-drill-pi"
    spec = write_spec(tmp_path, LONG_RUN)
    proc = _start_continue(spec, small_base, results)
    try:
        _wait_for_training(layout, tag)
        filler = _fill(small_disk)
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = " ".join(stderr.split())
    assert proc.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr and "MarkupError" not in stderr
    assert f"{tag}: No space left writing {small_base / 'base_checkpoints' / tag}" in text, stderr[-3000:]
    assert "Connection closed by peer" not in text.split("Rerun just these with")[0].split("job(s) failed")[1]
    steps = checkpoint_steps(BaseLayout(small_base).checkpoint_dir(tag))
    filler.unlink()
    resumed = run_process(
        "continue",
        "--spec",
        str(layout.tag_spec(tag)),
        "--variants",
        "pi",
        "--resume",
        "--nproc",
        "2",
        "--steps",
        str(max(steps) + 2 - 4),  # the run's steps count from the base step (4)
        "--base-dir",
        str(small_base),
        "--results-dir",
        str(results),
        timeout=300,
    )
    assert resumed.code == 0, resumed.err[-3000:]
    assert max(checkpoint_steps(BaseLayout(small_base).checkpoint_dir(tag))) == max(steps) + 2


def test_a_resume_on_fewer_processes_keeps_the_global_batch(tiny_base_dir, tmp_path):
    """Trained on 2 ranks (512 tokens/step), resumed on 1: the console says the batch is kept by 2 accumulation
    steps, and the resumed steps train 512 tokens each (not half as many)."""
    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    results = tmp_path / "ws-results"
    layout, tag = ExperimentLayout(results, "drill"), "smoke-drill-pi"
    spec = write_spec(tmp_path, LONG_RUN.replace("steps: 100000", "steps: 2"))
    common = [
        "--spec",
        str(spec),
        "--base-dir",
        str(base_dir),
        "--results-dir",
        str(results),
        "--variants",
        "pi",
    ]
    first = run_process("continue", *common, "--nproc", "2")
    assert first.code == 0, first.err[-3000:]
    resumed = run_process("continue", *common, "--nproc", "1", "--resume", "--steps", "4")
    assert resumed.code == 0, resumed.err[-3000:]
    assert "the global batch stays 512 tokens/step, by 2 gradient accumulation step(s)" in " ".join(
        resumed.err.split()
    )
    records = [json.loads(line) for line in layout.metrics_file(tag).read_text().splitlines()]
    tokens = {r["step"]: r["tokens"] for r in records if r["type"] == "train"}
    assert sorted(tokens) == [5, 6, 7, 8]
    assert [tokens[s] - tokens.get(s - 1, 0) for s in (5, 6, 7, 8)] == [512, 512, 512, 512]
    assert "x 1 ranks x 2 accum = 512 tokens/step" in layout.train_log(tag).read_text()
