"""Helpers for the training tests: run configs and metrics records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def make_run_config(
    base: Path,
    run_dir: Path,
    tag: str = "d2",
    *,
    init: dict[str, Any] | None = None,
    rope: dict[str, Any] | None = None,
    resume: bool = False,
    data_start: dict[str, Any] | None = None,
    **train: Any,
):
    """A RunConfig for a 2-layer, width-32 model at seq 32 unless `train` overrides it."""
    from rlab.spec.run import RunConfig

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
