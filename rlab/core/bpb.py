"""Bits per byte of one batch: the definition shared by in-training val BPB and `rlab.evals`.

BPB = nats summed over target tokens / (ln 2 x UTF-8 bytes of those targets), nanochat's metric: it
does not depend on the vocabulary size. Special tokens (0 bytes in token_bytes) and ignored targets
(-1) are excluded from both sums.
"""

from __future__ import annotations

import torch


def token_losses(model, inputs: torch.Tensor, targets: torch.Tensor, token_bytes: torch.Tensor):
    """Per-target (nats, bytes) of one batch, each (B, T) float64, 0 where a target is ignored or special."""
    B, T = targets.shape
    with torch.no_grad():
        losses = model(inputs, targets, loss_reduction="none").view(B, T).double()  # (B, T), 0 where ignored
    valid = targets >= 0  # (B, T)
    nbytes = torch.where(valid, token_bytes[targets.clamp(min=0)], 0)  # (B, T) long, 0 = special/ignored
    return torch.where(nbytes > 0, losses, 0.0), nbytes.double()


def score_tokens(model, inputs: torch.Tensor, targets: torch.Tensor, token_bytes: torch.Tensor):
    """Per-row (nats, bytes, counted tokens) of one batch: inputs/targets (B, T), -1 = ignore.

    Returns three (B,) float64 tensors on the model's device.
    """
    nats, nbytes = token_losses(model, inputs, targets, token_bytes)
    return nats.sum(dim=1), nbytes.sum(dim=1), (nbytes > 0).double().sum(dim=1)
