"""Tiny random models of both nanochat generations, written as real checkpoints in rlab's layout (meta + model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rlab.core.checkpoint import save_checkpoint
from rlab.core.checkpoint_meta import CheckpointMeta
from rlab.core.gpt import GPT, GPTConfig
from rlab.paths import BaseLayout
from rlab.spec.rope import RopeSpec

SHAPES: dict[str, dict[str, Any]] = {
    "nanochat-2025": dict(sequence_len=64, vocab_size=300, n_layer=2, n_head=4, n_kv_head=2, n_embd=64),
    "nanochat-2026": dict(
        sequence_len=64, vocab_size=300, n_layer=4, n_head=4, n_kv_head=2, n_embd=64, window_pattern="SSSL"
    ),
}
"""head dim 16, GQA; the 2026 model has short windows (SSSL), value embeddings, smear and backout."""

TINY_SHAPE = {"sequence_len": 8, "vocab_size": 4, "n_layer": 1, "n_head": 1, "n_kv_head": 1, "n_embd": 3}


def tiny_meta(step: int, model_config: dict[str, Any] | None = None, **fields: Any) -> CheckpointMeta:
    """A valid meta of `step` (a small model_config unless one is given), plus any other meta keys."""
    return CheckpointMeta.model_validate({"step": step, "model_config": model_config or TINY_SHAPE, **fields})


def random_model(architecture: str, rope: RopeSpec | None = None, seed: int = 0, **shape: Any) -> GPT:
    """A model of `architecture` with every weight random (scale 0.3), so every part changes the logits."""
    torch.manual_seed(seed)
    config = GPTConfig(**{**SHAPES[architecture], **shape, "architecture": architecture})
    model = GPT(config, rope)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model.eval()


def write_checkpoint(
    base_dir: Path, tag: str, model: GPT, step: int = 10, extra_meta: dict[str, Any] | None = None
) -> Path:
    """`model` saved as `<base_dir>/base_checkpoints/<tag>/model_<step>.pt` + meta, as rlab's trainer writes them."""
    ckpt = BaseLayout(base_dir).checkpoint_dir(tag)
    ckpt.mkdir(parents=True, exist_ok=True)
    meta = tiny_meta(
        step,
        model.config.nanochat_dict(),
        architecture=model.config.architecture,
        rope=model.rope.model_dump(mode="json"),
        tag=tag,
        variant=model.rope.variant.value,
        **(extra_meta or {}),
    )
    save_checkpoint(ckpt, step, model.state_dict(), meta)
    return ckpt
