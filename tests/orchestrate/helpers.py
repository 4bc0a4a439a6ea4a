"""Checkpoints for orchestration tests in nanochat's layout: a real tiny model file (so the preflight, which
opens what a run will read, finds a loadable checkpoint), random-ish optimizer shards of a chosen size, and the
tokenizer and shards a run reads, built once per test process by the real prepare pipeline."""

from __future__ import annotations

import atexit
import functools
import io
import json
import shutil
import tempfile
from pathlib import Path

from rlab.paths import BaseLayout, meta_file, model_file, optim_file

MODEL_CONFIG = {
    "sequence_len": 256,
    "vocab_size": 512,
    "n_layer": 2,
    "n_head": 2,
    "n_kv_head": 2,
    "n_embd": 32,
}


@functools.cache
def _model_bytes() -> bytes:
    """A nanochat-2025 state dict of MODEL_CONFIG's shape, initialised (finite), as torch.save writes it."""
    import torch

    from rlab.core.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(**MODEL_CONFIG))
    model.init_weights()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


@functools.cache
def _inputs() -> Path:
    """A tokenizer (vocab <= 512) and train/val shards, from `rlab.data.prepare` on generated text."""
    from rlab.data.prepare import PrepareOptions, prepare_data
    from tests.conftest import make_english_docs

    root = Path(tempfile.mkdtemp(prefix="rlab-inputs-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    corpus = root / "corpus"
    corpus.mkdir()
    for i, text in enumerate(make_english_docs(40, seed=3)):
        (corpus / f"doc_{i:03d}.txt").write_text(text, encoding="utf-8")
    options = PrepareOptions(seed=0, val_fraction=0.2, long_min_chars=10**9, shard_chars=40_000, row_groups=2)
    prepare_data(root / "base", corpus=[corpus], vocab_size=MODEL_CONFIG["vocab_size"], options=options)
    return root / "base"


def add_inputs(base_dir: Path) -> None:
    """The tokenizer and shards a run reads, copied into `base_dir` (where missing)."""
    layout, source = BaseLayout(base_dir), BaseLayout(_inputs())
    for src, dst in ((source.tokenizer_dir, layout.tokenizer_dir), (source.data_dir, layout.data_dir)):
        if not dst.exists():
            shutil.copytree(src, dst)


def make_checkpoint(
    base_dir: Path,
    tag: str,
    steps=(10,),
    ranks: int = 2,
    size: int = 4096,
    inputs: bool = True,
    model: bool = True,
) -> Path:
    """A checkpoint folder per step: a real tiny model file (`model=False`: `size` random bytes, a stand-in
    for a model too big to make, e.g. d20's), `ranks` optimizer shards of `size` bytes each, a meta JSON;
    with `inputs`, the base dir also gets a tokenizer and shards."""
    ckpt = BaseLayout(base_dir).checkpoint_dir(tag)
    ckpt.mkdir(parents=True, exist_ok=True)
    for step in steps:
        stand_in = bytes((step + i) % 251 for i in range(size))
        model_file(ckpt, step).write_bytes(_model_bytes() if model else stand_in)
        for rank in range(ranks):
            optim_file(ckpt, step, rank).write_bytes(bytes((rank + step + i) % 13 for i in range(size)))
        meta_file(ckpt, step).write_text(json.dumps({"step": step, "model_config": MODEL_CONFIG}))
    if inputs:
        add_inputs(base_dir)
    return ckpt


def snapshot(folder: Path) -> dict[str, tuple[bytes, float]]:
    """Content and mtime of every file in a folder (to prove it was not touched)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime) for p in sorted(folder.iterdir())}
