"""Failures of a training step, each said in one line: compiler errors fall back (first step only), an OOM
names the shape and the memory plan, an NCCL error names the rank."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed

from rlab.core.checkpoint_meta import read_meta
from rlab.core.distributed import DistInfo
from rlab.core.muon import compiled_newton_schulz
from rlab.core.step_failures import is_compiler_error, is_oom, oom_error
from rlab.core.train import train
from rlab.errors import TrainingError
from tests.core.train_helpers import make_run_config, train_records

pytestmark = pytest.mark.usefixtures("one_thread")


def _raise_once(exc: BaseException):
    """on_model callback: the first block's first training forward raises `exc` (evals come later)."""

    def attach(model) -> None:
        fired = []

        def hook(module, args):
            if module.training and not fired:
                fired.append(True)
                raise exc

        model.transformer.h[0].register_forward_pre_hook(hook)

    return attach


def _failing_compile(monkeypatch) -> None:
    """torch.compile as usual, but its backend fails: dynamo raises a real BackendCompilerFailed."""
    real = torch.compile

    def backend(gm, example_inputs):
        raise RuntimeError("simulated compiler failure")

    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: real(model, backend=backend))


def test_a_compiler_error_at_the_first_step_continues_uncompiled(
    train_base: Path, tmp_path: Path, monkeypatch, caplog
):
    _failing_compile(monkeypatch)
    cfg = make_run_config(train_base, tmp_path / "run", steps=3, compile=True)
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="rlab.core.train"):
        result = train(cfg)
    torch._dynamo.reset()
    assert result["step"] == 3
    assert len(train_records(tmp_path / "run")) == 3
    assert any("torch.compile failed at the first step" in r.message for r in caplog.records)


def test_the_fallback_run_equals_an_uncompiled_run(train_base: Path, tmp_path: Path, monkeypatch):
    """The failed first attempt leaves nothing behind: the losses are those of a run never compiled (Muon's
    Newton-Schulz runs eagerly too, even where an earlier test already compiled it in this process)."""
    plain = make_run_config(train_base, tmp_path / "plain", steps=3, compile=False)
    train(plain)
    compiled_newton_schulz()  # made with the working compiler, as an earlier compiled test would leave it
    _failing_compile(monkeypatch)
    torch._dynamo.reset()
    train(make_run_config(train_base, tmp_path / "fallback", steps=3, compile=True))
    torch._dynamo.reset()
    losses = [[r["loss"] for r in train_records(tmp_path / name)] for name in ("plain", "fallback")]
    assert losses[0] == losses[1]


def test_an_oom_is_one_line_with_the_memory_plan(train_base: Path, tmp_path: Path):
    cfg = make_run_config(train_base, tmp_path / "run", steps=3)
    with pytest.raises(TrainingError) as info:
        train(
            cfg,
            on_model=_raise_once(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")),
        )
    err = info.value
    assert "\n" not in err.message
    assert "Out of memory on rank 0 of 1" in err.message and "at step 1" in err.message
    assert "`rlab memory` plans" in err.hint and "device_batch_size 4 x seq_len 32" in err.hint
    failed = [r for r in train_records(tmp_path / "run", "failed")]
    assert failed and failed[0]["error"].startswith("Out of memory on rank 0")


@pytest.mark.slow  # a compile and the memory plan's subprocess: ~30 s on a shared 2-core CPU
def test_an_oom_during_the_compile_check_is_not_a_compiler_error(
    train_base: Path, tmp_path: Path, monkeypatch
):
    """Out of memory at the first compiled step stops the run (falling back to eager would need more memory)."""
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: real(model, backend="eager"))
    cfg = make_run_config(train_base, tmp_path / "run", steps=2, compile=True)
    torch._dynamo.reset()
    with pytest.raises(TrainingError, match="Out of memory on rank 0"):
        train(cfg, on_model=_raise_once(torch.OutOfMemoryError("CUDA out of memory.")))
    torch._dynamo.reset()


def test_a_distributed_error_names_the_rank(train_base: Path, tmp_path: Path):
    cfg = make_run_config(train_base, tmp_path / "run", steps=2)
    error = torch.distributed.DistBackendError(
        "NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error"
    )
    with pytest.raises(TrainingError) as info:
        train(cfg, on_model=_raise_once(error))
    assert "error on rank 0 of 1 (host " in info.value.message
    assert "unhandled system error" in info.value.message and "at step 1" in info.value.message


def test_classification():

    oom = torch.OutOfMemoryError("CUDA out of memory")
    wrapped = BackendCompilerFailed(lambda *a: None, oom, None)
    assert is_oom(oom) and is_oom(wrapped) and not is_compiler_error(wrapped)
    assert is_compiler_error(BackendCompilerFailed(lambda *a: None, RuntimeError("bad lowering"), None))
    assert not is_compiler_error(RuntimeError("a plain failure")) and not is_oom(RuntimeError("x"))


def test_oom_hint_names_the_largest_batch_that_fits():

    info = DistInfo(rank=3, local_rank=3, world_size=8, device=torch.device("cpu"))
    plan = {
        "shape": {"device_batch_size": 8, "seq_len": 8192, "grad_accum_steps": 1},
        "peak_gib": 81.5,
        "budget_gib": 72.0,
        "gpu_memory_gib": 80.0,
        "fits": False,
        "suggestion": {"device_batch_size": 4, "grad_accum_steps": 2, "peak_gib": 47.5},
    }
    err = oom_error(torch.OutOfMemoryError("CUDA out of memory."), 1, info, plan)
    assert "rank 3 of 8" in err.message
    assert "plans 81.5 GiB per rank for device_batch_size 8 x seq_len 8192" in err.hint
    assert "Set train.device_batch_size: 4 (then 2 accumulation steps keep total_batch_size" in err.hint


WORKER = """
import os, sys, torch
real = torch.compile
if os.environ["RANK"] == "1":  # only this rank's compiler fails
    def backend(gm, example_inputs):
        raise RuntimeError("simulated compiler failure on rank 1")
    torch.compile = lambda model, **kwargs: real(model, backend=backend)
else:
    torch.compile = lambda model, **kwargs: real(model, backend="eager")
from rlab.core.train import main

sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # torchrun with 2 gloo processes
def test_ranks_decide_the_fallback_together(train_base: Path, tmp_path: Path):
    """Rank 1's compiler fails, rank 0's does not: both continue uncompiled, in step with each other."""

    cfg = make_run_config(train_base, tmp_path / "run", steps=3, compile=True)
    (tmp_path / "run.json").write_text(cfg.model_dump_json())
    (tmp_path / "worker.py").write_text(WORKER)
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    proc = subprocess.run(
        [*argv, str(tmp_path / "worker.py"), str(tmp_path / "run.json")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "[rank 0] WARNING" in proc.stderr
        and "(on another rank); every rank continues uncompiled" in proc.stderr
    )
    assert "[rank 1] WARNING" in proc.stderr and "simulated compiler failure on rank 1" in proc.stderr
    assert [r["step"] for r in train_records(tmp_path / "run")] == [1, 2, 3]
    meta = read_meta(train_base / "base_checkpoints" / "d2", 3)
    assert len(set(meta.replica_param_checksums)) == 1
