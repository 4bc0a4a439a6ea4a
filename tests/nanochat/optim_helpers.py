"""A reference checkpoint's model with rlab's optimizers, and their state by parameter name, for the import tests."""

from __future__ import annotations

from pathlib import Path

import torch

from rlab.core.checkpoint import load_model
from rlab.core.gpt import GPT
from rlab.core.optim import build_optimizers
from rlab.spec.train import LRSpec


def model_and_optimizers(ckpt_dir: Path, step: int = 20) -> tuple[GPT, list[torch.optim.Optimizer]]:
    """The checkpoint's model and fresh rlab optimizers over it (nanochat's groups, default LRs)."""
    model, _ = load_model(ckpt_dir, step)
    return model, build_optimizers(model, LRSpec(), model.config.n_embd)


def optimizer_state(
    model: GPT, optimizers: list[torch.optim.Optimizer]
) -> dict[str, dict[str, torch.Tensor]]:
    """Every optimizer's per-parameter state, by parameter name, copied."""
    names = {id(p): n for n, p in model.named_parameters()}
    return {
        names[id(p)]: {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in st.items()}
        for opt in optimizers
        for p, st in opt.state.items()
    }
