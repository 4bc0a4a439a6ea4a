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
uses): the blocks, the rotary tables and the head are the model's own; only the last block's
attention is written out here, for a subset of queries. Values equal the full forward up to fp32
summation order; `tests/evals/test_core_metric.py` checks span losses and argmax hits against
full-logit forwards on real bundle tasks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from rlab.core import rope as rope_lib
from rlab.core.gpt import GPT, norm

HEAD_CHUNK = 256
"""Rows of logits per chunk: 256 x vocab 8192 fp32 = 8 MiB."""


def _rotary(model: GPT, ids: torch.Tensor, positions: torch.Tensor | None, freq_len: int | None):
    """cos, sin for every token, as `GPT.hidden_states` builds them: (1 or B, T, 1, d/2) each."""
    T = ids.size(1)
    freq_len = T if freq_len is None else freq_len
    if positions is None:
        return model._rotary.get(0, T, ids.device, freq_len)
    cos, sin = model._rotary.get(0, int(positions.max()) + 1, ids.device, freq_len)  # (1, P, 1, d/2)
    return cos[0, positions], sin[0, positions]  # (B, T, 1, d/2) each


def _last_block_at(
    block,
    x: torch.Tensor,
    cos_sin: tuple[torch.Tensor, torch.Tensor],
    scale: float,
    attn_mask: torch.Tensor | None,
    rows: torch.Tensor,
    cols: torch.Tensor,
    slots: torch.Tensor,
    n_slots: int,
) -> torch.Tensor:
    """The block's output (N, C) at positions (rows[n], cols[n]) of x (B, T, C).

    Keys and values come from every position; queries only from the selected ones, placed in a
    (B, n_slots) grid (slots[n] = the query's index within its row) so that one attention call
    serves all rows. Unused grid slots query position 0, which every mask lets see itself.
    """
    attn = block.attn
    B, T, C = x.shape
    H, Hkv, d = attn.n_head, attn.n_kv_head, attn.head_dim
    cos, sin = cos_sin
    h = norm(x)  # (B, T, C)
    k = attn.c_k(h).view(B, T, Hkv, d)  # (B, T, H_kv, d)
    v = attn.c_v(h).view(B, T, Hkv, d)  # (B, T, H_kv, d)
    k = norm(rope_lib.apply_rotary(k, cos, sin)).transpose(1, 2)  # (B, H_kv, T, d)
    v = v.transpose(1, 2)  # (B, H_kv, T, d)

    N = rows.numel()
    q = attn.c_q(h[rows, cols]).view(N, 1, H, d)  # (N, 1, H, d)
    cos_q = cos.expand(B, -1, -1, -1)[rows, cols].unsqueeze(1)  # (N, 1, 1, d/2)
    sin_q = sin.expand(B, -1, -1, -1)[rows, cols].unsqueeze(1)  # (N, 1, 1, d/2)
    q = norm(rope_lib.apply_rotary(q, cos_q, sin_q)).view(N, H, d)  # (N, H, d)

    grid_q = q.new_zeros(B, n_slots, H, d)  # (B, S, H, d)
    grid_q[rows, slots] = q
    grid_col = torch.zeros(B, n_slots, dtype=torch.long, device=x.device)  # (B, S)
    grid_col[rows, slots] = cols
    if attn_mask is None:  # plain causal rows: query at column c sees keys 0..c
        keys = torch.arange(T, device=x.device)  # (T,)
        mask = keys[None, None, :] <= grid_col[:, :, None]  # (B, S, T)
    else:
        mask = attn_mask[:, 0].gather(1, grid_col[:, :, None].expand(-1, -1, T))  # (B, S, T)
    y = F.scaled_dot_product_attention(
        grid_q.transpose(1, 2), k, v, attn_mask=mask[:, None], scale=scale, enable_gqa=H != Hkv
    )  # (B, H, S, d)
    y = y.transpose(1, 2)[rows, slots].reshape(N, C)  # (N, C)
    out = x[rows, cols] + attn.c_proj(y)  # (N, C)
    return out + block.mlp(norm(out))


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
    device = ids.device
    slots, n_slots, prev, count = [], 1, None, 0
    for r in rows:  # index of each query within its row
        count = count + 1 if r == prev else 0
        prev = r
        slots.append(count)
        n_slots = max(n_slots, count + 1)
    rows_t = torch.tensor(list(rows), dtype=torch.long, device=device)  # (N,)
    cols_t = torch.tensor(list(cols), dtype=torch.long, device=device)  # (N,)
    slots_t = torch.tensor(slots, dtype=torch.long, device=device)  # (N,)

    cos_sin = _rotary(model, ids, positions, freq_len)
    x = norm(model.transformer.wte(ids))  # (B, T, C)
    *early, last = model.transformer.h
    for block in early:
        x = block(x, cos_sin, model._softmax_scale, None, attn_mask)
    x = _last_block_at(last, x, cos_sin, model._softmax_scale, attn_mask, rows_t, cols_t, slots_t, n_slots)
    return norm(x)  # (N, C)


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
