"""Real kills: a job SIGKILLed 3 times and resumed at alternating world sizes counts exactly like an uninterrupted one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlab.core.checkpoint_meta import read_meta
from rlab.paths import checkpoint_steps, meta_file
from tests.core.train_helpers import make_run_config, torchrun_argv, train_records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

STEPS, PER_STEP = 30, 2 * 4 * 32  # total_batch_size: 2 ranks x 4 x 32, or 1 rank x 2 micro-batches


def _start(cfg, path: Path, nproc: int) -> subprocess.Popen:
    path.write_text(cfg.model_dump_json())
    argv = torchrun_argv(path, nproc) if nproc > 1 else [sys.executable, "-m", "rlab.core.train", str(path)]
    return subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        start_new_session=True,
    )


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_after(proc: subprocess.Popen, ckpt_dir: Path, step: int, timeout: float = 180) -> None:
    """SIGKILL the job and all its workers once a checkpoint at or past `step` is complete."""
    deadline = time.monotonic() + timeout
    try:
        while max(checkpoint_steps(ckpt_dir), default=0) < step:
            if proc.poll() is not None:
                pytest.fail(f"job ended before step {step}: {proc.stderr.read()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no checkpoint {step} within {timeout}s")
            time.sleep(0.02)
    finally:
        for pid in [proc.pid, *_descendants(proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()


def _finish(proc: subprocess.Popen) -> None:
    try:
        _, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("job timed out")
    assert proc.returncode == 0, err[-3000:]


def test_three_kills_and_world_size_changes_keep_counts_exact(train_base, tmp_path):
    common = {"steps": STEPS, "save_every": 1, "keep_last": 2, "total_batch_size": PER_STEP}
    _finish(
        _start(
            make_run_config(train_base, tmp_path / "full", tag="full", **common), tmp_path / "full.json", 2
        )
    )

    ckpt = train_base / "base_checkpoints" / "cut"
    plan = [(2, 3), (1, 10), (2, 17), (1, None)]  # (processes, kill once this step is saved)
    for i, (nproc, kill_at) in enumerate(plan):
        cfg = make_run_config(train_base, tmp_path / "cut", tag="cut", resume=i > 0, **common)
        proc = _start(cfg, tmp_path / f"cut{i}.json", nproc)
        if kill_at is None:
            _finish(proc)
        else:
            _kill_after(proc, ckpt, kill_at)
            assert not meta_file(ckpt, STEPS).exists(), "the job finished before it could be killed"

    full = read_meta(train_base / "base_checkpoints" / "full", STEPS)
    cut = read_meta(ckpt, STEPS)
    assert cut.world_size == 1 and cut.train_state.resumed_from >= 17
    assert full.tokens_trained == cut.tokens_trained == STEPS * PER_STEP
    assert full.train_state.run_tokens == cut.train_state.run_tokens == STEPS * PER_STEP
    assert full.train_state.skipped_total == cut.train_state.skipped_total == 0
    last = [r for r in train_records(tmp_path / "cut") if r["step"] == STEPS][-1]
    assert last["tokens"] == STEPS * PER_STEP
