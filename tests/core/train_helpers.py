"""Helpers for the training tests: run configs and metrics records."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from rlab.spec.run import RunConfig


@contextmanager
def root_logging_kept() -> Iterator[None]:
    """A worker's `main` sets up the root logger for its own process (`rlab.worker.configure_logging`); called in
    a test's process, the root logger is put back afterwards, so its stderr handler does not outlive the test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


class SimulatedCrash(RuntimeError):
    """Raised by `crash_after`'s hook."""


def crash_after(forwards: int):
    """A model hook (`on_model`) that raises `SimulatedCrash` at forward call `forwards + 1`: a job dying mid-run."""
    count = [0]

    def hook(module, args):
        count[0] += 1
        if count[0] > forwards:
            raise SimulatedCrash("simulated crash")

    return lambda model: model.register_forward_pre_hook(hook)


def make_run_config(
    base: Path,
    run_dir: Path,
    tag: str = "d2",
    *,
    init: dict[str, Any] | None = None,
    rope: dict[str, Any] | None = None,
    start: tuple[str, int] | None = None,
    stretch: str | None = None,
    resume: bool = False,
    data_start: dict[str, Any] | None = None,
    **train: Any,
):
    """A RunConfig for a 2-layer, width-32 model at seq 32 unless `train` overrides it. Shorthands: `start=(tag,
    step)` starts from that checkpoint; `stretch="yarn"` extends RoPE by that variant at factor 2."""

    if start is not None:
        init = {"kind": "checkpoint", "tag": start[0], "step": start[1]}
    if stretch is not None:
        rope = {"variant": stretch, "factor": 2.0}

    train_spec = {
        "seq_len": 32,
        "steps": 12,
        "device_batch_size": 4,
        "eval_every": None,
        "save_every": None,
        "seed": 7,
        "dtype": "float32",
        "lr": {"warmup_steps": 2},
    }
    train_spec.update(train)
    data = {
        "experiment": "test",
        "tag": tag,
        "variant": (rope or {}).get("variant", "rope"),
        "base_dir": str(base),
        "run_dir": str(run_dir),
        "init": init or {"kind": "scratch", "model": {"n_layer": 2, "n_embd": 32, "n_head": 2}},
        "rope": rope or {},
        "train": train_spec,
        "tracking": {"wandb": "disabled"},
        "resume": resume,
        "data_start": data_start,
    }
    return RunConfig.model_validate(data)


def train_records(run_dir: Path, kind: str = "train") -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == kind]


def torchrun_argv(path: Path, nproc: int) -> list[str]:
    """The command that runs the training worker on run config `path` under torchrun with `nproc` processes."""
    worker = ["-m", "rlab.core.train", str(path)]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        *worker,
    ]


def torchrun(cfg, path: Path, nproc: int = 2) -> subprocess.CompletedProcess:
    """Run the training worker under torchrun with `nproc` CPU processes (gloo); fails the test on error."""

    path.write_text(cfg.model_dump_json())
    argv = torchrun_argv(path, nproc)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # own session, so a hung job can be killed with all its workers
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"torchrun timed out:\n{err[-4000:]}")
    assert proc.returncode == 0, err[-4000:]
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
