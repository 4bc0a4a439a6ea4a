"""Checkpoint files: atomic writes, completeness, keep-last, refusal of non-finite weights, SIGKILL mid-save."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from rlab.core.checkpoint import find_last_step, prune_checkpoints, save_checkpoint
from rlab.core.checkpoint_meta import read_meta
from rlab.errors import CheckpointError, TrainingError
from rlab.paths import checkpoint_steps, meta_file, model_file, optim_file, optim_ranks
from tests.conftest import REPO_ROOT
from tests.core.tiny_checkpoints import tiny_meta

pytestmark = pytest.mark.usefixtures("one_thread")


def _state(value: float = 1.0) -> dict[str, torch.Tensor]:
    return {"transformer.wte.weight": torch.full((4, 3), value), "lm_head.weight": torch.ones(4, 3)}


def test_save_writes_nanochat_layout_and_meta_last(tmp_path):
    meta = tiny_meta(7)
    save_checkpoint(tmp_path, 7, _state(), meta, {"format": "rlab.optim/1"})
    assert model_file(tmp_path, 7).name == "model_000007.pt"
    assert optim_file(tmp_path, 7, 0).exists() and meta_file(tmp_path, 7).exists()
    assert read_meta(tmp_path, 7) == meta
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    # meta is the last file written: its mtime is not older than the others'
    assert meta_file(tmp_path, 7).stat().st_mtime_ns >= model_file(tmp_path, 7).stat().st_mtime_ns


def test_step_without_meta_is_incomplete(tmp_path):
    save_checkpoint(tmp_path, 1, _state(), tiny_meta(1))
    torch.save(_state(), model_file(tmp_path, 2))  # model but no meta: an interrupted save
    (tmp_path / ".model_000003.pt.abc.tmp").write_bytes(b"partial")
    assert checkpoint_steps(tmp_path) == [1] and find_last_step(tmp_path) == 1
    with pytest.raises(CheckpointError, match=r"step 2 .*found: 1"):
        read_meta(tmp_path, 2)


def test_refuses_non_finite_weights(tmp_path):
    with pytest.raises(TrainingError, match="non-finite"):
        save_checkpoint(tmp_path, 3, _state(float("nan")), tiny_meta(3))
    assert checkpoint_steps(tmp_path) == [] and not model_file(tmp_path, 3).exists()


def test_prune_keeps_newest_and_protected(tmp_path):
    for s in (10, 20, 30, 40):
        save_checkpoint(tmp_path, s, _state(), tiny_meta(s), {"format": "x"})
    deleted = prune_checkpoints(tmp_path, 2, candidates=[20, 30, 40])  # 10 = the source step, protected
    assert deleted == [20]
    assert checkpoint_steps(tmp_path) == [10, 30, 40]
    assert not optim_file(tmp_path, 20, 0).exists()


_CHILD = """
import os, sys, time
from pathlib import Path
import torch
import rlab.core.checkpoint as ck
from tests.core.tiny_checkpoints import tiny_meta

ckpt, hang_at = Path(sys.argv[1]), int(sys.argv[2])
ck.save_checkpoint(ckpt, 1, {"w": torch.ones(8)}, tiny_meta(1), {"format": "rlab.optim/1"})
calls = []
real_fsync = os.fsync
def fsync(fd):
    calls.append(fd)
    if len(calls) == hang_at:  # stop here, mid-save, and wait to be killed
        (ckpt / "READY").write_text("x")
        time.sleep(60)
    real_fsync(fd)
os.fsync = fsync  # the shared os module: rlab.atomic_io calls it for every file and folder
ck.save_checkpoint(ckpt, 2, {"w": torch.full((1 << 16,), 2.0)}, tiny_meta(2), {"format": "rlab.optim/1"})
"""


@pytest.mark.parametrize(
    "hang_at", [1, 3, 5], ids=["model-tmp-written", "optim-tmp-written", "meta-tmp-written"]
)
def test_sigkill_during_save_leaves_previous_checkpoint(tmp_path, hang_at):
    # fsync calls in order: model tmp (1), dir (2), optim tmp (3), dir (4), meta tmp (5)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(ckpt), str(hang_at)], cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 600  # a hang guard, not a timing: a loaded laptop is slow
        while not (ckpt / "READY").exists():
            assert proc.poll() is None, "child exited before reaching the save"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert checkpoint_steps(ckpt) == [1]  # step 2 is not complete, whatever was written
    assert find_last_step(ckpt) == 1
    assert torch.load(model_file(ckpt, 1))["w"].sum() == 8
    assert read_meta(ckpt, 1) == tiny_meta(1)
    assert not meta_file(ckpt, 2).exists()


def test_optim_ranks_lists_the_ranks_present_gaps_and_strays_aside(tmp_path):
    for rank in (0, 2, 10):
        optim_file(tmp_path, 5, rank).touch()
    optim_file(tmp_path, 6, 1).touch()  # another step
    (tmp_path / "optim_000005_rankX.pt").touch()  # not a rank
    assert optim_ranks(tmp_path, 5) == [0, 2, 10]
    assert optim_ranks(tmp_path, 7) == []
