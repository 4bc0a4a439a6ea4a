"""Fake checkpoints for orchestration tests: real files in nanochat's layout, no torch needed."""

from __future__ import annotations

import json
from pathlib import Path

from rlab.paths import BaseLayout, meta_file, model_file, optim_file


def make_checkpoint(base_dir: Path, tag: str, steps=(10,), ranks: int = 2, size: int = 4096) -> Path:
    """A checkpoint folder with model/meta/optim files per step (random-ish bytes, a real meta JSON)."""
    ckpt = BaseLayout(base_dir).checkpoint_dir(tag)
    ckpt.mkdir(parents=True, exist_ok=True)
    for step in steps:
        model_file(ckpt, step).write_bytes(bytes((step + i) % 251 for i in range(size)))
        for rank in range(ranks):
            optim_file(ckpt, step, rank).write_bytes(bytes((rank + i) % 13 for i in range(size // 2)))
        meta = {
            "step": step,
            "model_config": {
                "sequence_len": 256,
                "vocab_size": 512,
                "n_layer": 2,
                "n_head": 2,
                "n_kv_head": 2,
                "n_embd": 32,
            },
        }
        meta_file(ckpt, step).write_text(json.dumps(meta))
    return ckpt


def snapshot(folder: Path) -> dict[str, tuple[bytes, float]]:
    """Content and mtime of every file in a folder (to prove it was not touched)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime) for p in sorted(folder.iterdir())}
