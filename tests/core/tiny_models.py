"""Tiny GPTs for the core tests: one default shape and the two ways the tests fill a model's weights."""

from __future__ import annotations

from typing import Any

import torch

from rlab.core.gpt import GPT, GPTConfig
from rlab.spec.rope import RopeSpec

TINY: dict[str, Any] = dict(sequence_len=32, vocab_size=100, n_layer=2, n_head=4, n_kv_head=2, n_embd=32)


def noisy_gpt(seed: int = 0, std: float = 0.2, rope: RopeSpec | None = None, **shape: Any) -> GPT:
    """`TINY` (or `shape` over it) with every weight drawn from N(0, std) under `seed`: every path affects the
    logits."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{**TINY, **shape}), rope)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


def initialized_gpt(seed: int = 0, head_std: float | None = None, **shape: Any) -> GPT:
    """`TINY` (or `shape` over it) with nanochat's `init_weights` under `seed`; with `head_std`, a live head
    (`init_weights` zeroes it) drawn from N(0, head_std)."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{**TINY, **shape}))
    model.init_weights()
    if head_std is not None:
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, head_std)
    return model
