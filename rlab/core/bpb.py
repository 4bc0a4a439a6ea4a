"""Bits per byte of one batch: the definition shared by in-training val BPB and `rlab.evals`.

BPB = nats summed over target tokens / (ln 2 x UTF-8 bytes of those targets), nanochat's metric: it
does not depend on the vocabulary size. Special tokens (0 bytes in token_bytes) and ignored targets
(-1) are excluded from both sums.
"""

from __future__ import annotations

import torch


def score_tokens(model, inputs: torch.Tensor, targets: torch.Tensor, token_bytes: torch.Tensor):
    """Per-row (nats, bytes, counted tokens) of one batch: inputs/targets (B, T), -1 = ignore.

    Returns three (B,) float64 tensors on the model's device.
    """
    B, T = targets.shape
    with torch.no_grad():
        losses = model(inputs, targets, loss_reduction="none").view(B, T).double()  # (B, T), 0 where ignored
    valid = targets >= 0  # (B, T)
    nbytes = torch.where(valid, token_bytes[targets.clamp(min=0)], 0)  # (B, T) long, 0 = special/ignored
    counted = nbytes > 0
    nats = torch.where(counted, losses, 0.0).sum(dim=1)  # (B,)
    return nats, nbytes.double().sum(dim=1), counted.double().sum(dim=1)
