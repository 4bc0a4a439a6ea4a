"""A forward pass that computes only what scored predictions need, for CORE's batched scoring.

CORE scores a few positions per row (an answer's tokens after a long prompt: 1-7 % of the tokens
of a few-shot or cropped prompt). Two pieces of a GPT's work depend only on those positions:

* the last block's query projection, attention output, c_proj and MLP: every earlier block's
  output is needed everywhere (it feeds later keys and values), but the last block's output is
  read only by the lm_head. Here it runs on the scored positions only, its keys and values on
  the whole row (for the 4-layer bench model, about a fifth of the layer compute of a cropped
  hellaswag row);
* the lm_head, soft-cap, log-softmax and argmax: run on the scored positions only, in chunks of
  `HEAD_CHUNK` rows, so that the (rows, vocab) logits are not one large array streamed through
  memory once per element-wise pass (2400 positions at vocab 8192 on a 2-core CPU: 111 ms in
  chunks of 256, 221 ms in one pass, 118 ms in chunks of 64, where the lm_head matmul re-reads
  its weight too often; the matmul alone is 80 ms).

Both compute the same functions as `GPT.hidden_states` + `GPT.logits_at` (which `forward`
uses): the first is `GPT.hidden_states(..., at=(rows, cols))`, the model's own blocks with the
last one's queries restricted to the selected positions. Values equal the full forward up to fp32
summation order; `tests/evals/test_core_metric.py` checks span losses and argmax hits against
full-logit forwards on real bundle tasks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from rlab.core.gpt import GPT

HEAD_CHUNK = 256
"""Rows of logits per chunk: 256 x vocab 8192 fp32 = 8 MiB."""


def hidden_at(
    model: GPT,
    ids: torch.Tensor,
    rows: Sequence[int],
    cols: Sequence[int],
    positions: torch.Tensor | None = None,
    attn_mask: torch.Tensor | None = None,
    freq_len: int | None = None,
) -> torch.Tensor:
    """The final-normed hidden states (N, C) that `GPT.hidden_states(ids, positions, attn_mask,
    freq_len)` gives at positions (rows[n], cols[n]) of ids (B, T), computing the last block there only.

    `rows` must be non-decreasing (the queries of one row together), as CORE's packing lists them.
    """
    at = (
        torch.tensor(list(rows), dtype=torch.long, device=ids.device),  # (N,)
        torch.tensor(list(cols), dtype=torch.long, device=ids.device),  # (N,)
    )
    return model.hidden_states(ids, positions, attn_mask, freq_len, at=at)


def head_stats(model: GPT, hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position, the cross-entropy of `targets` (N,) under `model.logits_at(hidden)` (N, V)
    and whether the argmax hits it, computed `HEAD_CHUNK` rows at a time. Returns (nll, hit), (N,) each."""
    nll = [hidden.new_zeros(0)]
    hit = [torch.zeros(0, dtype=torch.bool, device=hidden.device)]
    for start in range(0, hidden.size(0), HEAD_CHUNK):
        logits = model.logits_at(hidden[start : start + HEAD_CHUNK])  # (n, V) fp32, soft-capped
        tgt = targets[start : start + HEAD_CHUNK]  # (n,)
        nll.append(F.cross_entropy(logits, tgt, reduction="none"))
        hit.append(logits.argmax(dim=-1) == tgt)
    return torch.cat(nll), torch.cat(hit)
