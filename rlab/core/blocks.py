"""The transformer block of the GPT (`rlab.core.gpt`): attention, MLP, and the KV cache decoding uses.

Pre-norm: x = x + attn(norm(x)); x = x + mlp(norm(x)). RMSNorm has no learnable parameters.
Attention: separate q/k/v/out projections, grouped-query (n_kv_head <= n_head), RoPE then QK-norm
(nanochat's order), then q and k times the architecture's `qk_scale` (nanochat-2026: 1.2). With value
embeddings (nanochat-2026, alternating layers), v gets `3 * sigmoid(ve_gate(x[..., :12]))` times the
layer's value embedding of the token, one gate per kv head. MLP: 4x hidden, relu(x)^2. No biases.

Masks: `attn_mask` replaces the causal rule when given: a boolean tensor (True = may attend, broadcastable
to (B, 1, Tq, Tk)) for packed rows, a `SlidingWindow` for windowed layers (FlexAttention or a dense mask,
`rlab.core.attention`); the model builds them (`GPT._layer_masks`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from rlab.core import rope as rope_lib
from rlab.core.architecture import Architecture, has_value_embed
from rlab.core.attention import SlidingWindow, causal_attention, window_attention

VE_GATE_CHANNELS = (
    12  # nanochat-2026: the value-embedding gate reads the first 12 channels of the block input
)


def norm(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dim, no learnable parameters, in x's dtype.

    CUDA's autocast runs rms_norm in fp32 and hands an fp32 tensor on; a bf16 residual stream
    (`GPT.set_stream_dtype`) stays bf16 through its norms, as nanochat-2026 keeps it. (CPU autocast
    leaves rms_norm alone, so CPU numerics are the plain call's.)
    """
    if x.dtype == torch.float32 or x.device.type != "cuda":
        return F.rms_norm(x, (x.size(-1),))
    with torch.autocast("cuda", enabled=False):
        return F.rms_norm(x, (x.size(-1),))


class KVCache:
    """Per-layer keys and values for incremental decoding; grows on demand.

    `pos` is the number of tokens already cached (the position of the next token). `seq_len` is
    the planned total length, if known: it is the initial capacity and the length at which
    length-dependent RoPE variants (dynamic-ntk) are evaluated, so that decoding token by token
    uses exactly the frequencies of one full forward over `seq_len` tokens. `prev_embedding`
    (B, 1, C) is the last token's normed embedding, which the smear gate (nanochat-2026) mixes
    into the next token. `dtype` None: the dtype of the first keys inserted (bf16 under autocast, so
    a GPU's cache takes half the memory of an fp32 one).
    """

    def __init__(
        self,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        num_layers: int,
        device: torch.device | str,
        dtype: torch.dtype | None = None,
        seq_len: int | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.num_layers = num_layers
        self.device = torch.device(device)
        self.dtype = dtype
        self.seq_len = seq_len
        self.pos = 0
        self.prev_embedding: torch.Tensor | None = None
        self._capacity = 0
        self._k: list[torch.Tensor] = []
        self._v: list[torch.Tensor] = []
        if seq_len and dtype is not None:
            self._grow(seq_len)

    def _grow(self, needed: int) -> None:
        assert self.dtype is not None, "the cache's dtype is set before it holds anything"
        capacity = max(needed, 2 * self._capacity, 64)
        shape = (self.batch_size, self.num_kv_heads, capacity, self.head_dim)  # (B, H_kv, cap, d)
        new_k = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.num_layers)]
        new_v = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.num_layers)]
        if self._k:  # keep what is cached so far
            for old, new in zip(self._k + self._v, new_k + new_v, strict=True):
                new[:, :, : self.pos] = old[:, :, : self.pos]
        self._k, self._v, self._capacity = new_k, new_v, capacity

    def insert(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, H_kv, T, d) at positions pos..pos+T-1; return all keys/values so far (B, H_kv, pos+T, d)."""
        stop = self.pos + k.size(2)
        if self.dtype is None:
            self.dtype = k.dtype
        if stop > self._capacity:
            self._grow(max(stop, self.seq_len or 0))
        self._k[layer][:, :, self.pos : stop] = k
        self._v[layer][:, :, self.pos : stop] = v
        return self._k[layer][:, :, :stop], self._v[layer][:, :, :stop]

    def advance(self, num_tokens: int) -> None:
        """Called by the model once all layers have inserted this step's tokens."""
        self.pos += num_tokens

    def reset(self) -> None:
        self.pos = 0
        self.prev_embedding = None

    def freq_len(self, num_new: int) -> int:
        """The sequence length at which length-dependent RoPE frequencies are evaluated."""
        return max(self.seq_len or 0, self.pos + num_new)


class LayerInputs(NamedTuple):
    """What one layer reads besides the residual stream x; `GPT._trunk` builds it once per layer.

    `ve` (B, T, H_kv*d) is the layer's value embedding or None; `attn_mask` (a bool tensor broadcastable
    to (B, 1, T, Tk), True = may attend, or a `SlidingWindow`) replaces the causal rule.
    """

    ve: torch.Tensor | None
    cos_sin: tuple[torch.Tensor, torch.Tensor]
    scale: float
    kv_cache: KVCache | None
    attn_mask: torch.Tensor | SlidingWindow | None


class CausalSelfAttention(nn.Module):
    def __init__(self, config, layer_idx: int, arch: Architecture) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.n_head = config.n_head
        self.n_kv_head = config.n_kv_head
        self.head_dim = config.head_dim
        self.qk_scale = arch.qk_scale
        d = config.n_embd
        self.c_q = nn.Linear(d, self.n_head * self.head_dim, bias=False)
        self.c_k = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.c_v = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        with_ve = arch.value_embeds and has_value_embed(layer_idx, config.n_layer)
        self.ve_gate = nn.Linear(VE_GATE_CHANNELS, self.n_kv_head, bias=False) if with_ve else None

    def forward(self, x: torch.Tensor, layer: LayerInputs) -> torch.Tensor:
        """x (B, T, C) normed block input -> the attention output (B, T, C)."""
        B, T, C = x.shape
        ve, (cos, sin), scale, kv_cache, attn_mask = layer
        q = self._queries(x, cos, sin).transpose(1, 2)  # (B, H, T, d)
        k, v = self._keys_values(x, ve, cos, sin)  # (B, H_kv, T, d) each

        if kv_cache is not None:
            k, v = kv_cache.insert(self.layer_idx, k, v)  # (B, H_kv, Tk, d)
            k, v = k.to(q.dtype), v.to(q.dtype)
        Tq, Tk = q.size(2), k.size(2)
        gqa = self.n_head != self.n_kv_head
        if isinstance(attn_mask, SlidingWindow):
            y = window_attention(q, k, v, attn_mask, scale, enable_gqa=gqa)
        elif attn_mask is not None:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale, enable_gqa=gqa)
        elif Tq == Tk:
            y = causal_attention(q, k, v, scale, enable_gqa=gqa)
        elif Tq == 1:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=False, scale=scale, enable_gqa=gqa)
        else:
            # A chunk after a cached prefix: query i (absolute position Tk-Tq+i) sees keys 0..Tk-Tq+i.
            prefix = Tk - Tq
            mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(diagonal=prefix)  # (Tq, Tk)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.c_proj(y)

    def _queries(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x (N, T, C) -> rotated, QK-normed, scaled queries (N, T, H, d)."""
        N, T, _ = x.shape
        return self._rotate_norm(self.c_q(x).view(N, T, self.n_head, self.head_dim), cos, sin)

    def _keys_values(
        self, x: torch.Tensor, ve: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> rotated, QK-normed keys and values (value embedding mixed in), (B, H_kv, T, d) each."""
        B, T, _ = x.shape
        k = self._rotate_norm(
            self.c_k(x).view(B, T, self.n_kv_head, self.head_dim), cos, sin
        )  # (B, T, H_kv, d)
        v = self.c_v(x).view(B, T, self.n_kv_head, self.head_dim)  # (B, T, H_kv, d)
        if self.ve_gate is not None and ve is not None:
            # Value residual (ResFormer): an input-dependent gate in (0, 3) per kv head
            gate = 3 * torch.sigmoid(self.ve_gate(x[..., :VE_GATE_CHANNELS]))  # (B, T, H_kv)
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_kv_head, self.head_dim)
        return k.transpose(1, 2), v.transpose(1, 2)

    def _rotate_norm(self, t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """RoPE, then QK-norm (nanochat's order), then the architecture's q/k scale: (..., T, H, d) -> same."""
        t = norm(rope_lib.apply_rotary(t, cos, sin))
        return t * self.qk_scale if self.qk_scale != 1.0 else t

    def attend_at(
        self, x: torch.Tensor, layer: LayerInputs, at: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """`forward`'s output (N, C) at positions at = (rows, cols) of x (B, T, C) only; rows non-decreasing.

        Keys and values come from every position, queries only from the selected ones, placed in a
        (B, S) grid (S = the most queries any row has) so one attention call serves all rows. Unused
        grid slots query position 0, which every mask lets see itself.
        """
        rows, cols = at
        B, T, C = x.shape
        H, d = self.n_head, self.head_dim
        ve, (cos, sin), scale, _, attn_mask = layer
        k, v = self._keys_values(x, ve, cos, sin)  # (B, H_kv, T, d) each
        N = rows.numel()
        cos_q = cos.expand(B, -1, -1, -1)[rows, cols].unsqueeze(1)  # (N, 1, 1, d/2)
        sin_q = sin.expand(B, -1, -1, -1)[rows, cols].unsqueeze(1)  # (N, 1, 1, d/2)
        q = self._queries(x[rows, cols].view(N, 1, C), cos_q, sin_q).view(N, H, d)  # (N, H, d)

        per_row = torch.bincount(rows, minlength=B)  # (B,)
        slots = (
            torch.arange(N, device=x.device) - (per_row.cumsum(0) - per_row)[rows]
        )  # (N,) index within its row
        n_slots = max(1, int(per_row.max())) if N else 1
        grid_q = q.new_zeros(B, n_slots, H, d)  # (B, S, H, d)
        grid_q[rows, slots] = q
        grid_col = torch.zeros(B, n_slots, dtype=torch.long, device=x.device)  # (B, S)
        grid_col[rows, slots] = cols
        if attn_mask is None:  # plain causal rows: the query at column c sees keys 0..c
            keys = torch.arange(T, device=x.device)  # (T,)
            mask = keys[None, None, :] <= grid_col[:, :, None]  # (B, S, T)
        else:
            if isinstance(attn_mask, SlidingWindow):
                attn_mask = attn_mask.dense()
            full = attn_mask.expand(B, 1, T, T)[:, 0]  # (B, T, T)
            mask = full.gather(1, grid_col[:, :, None].expand(-1, -1, T))  # (B, S, T)
        y = F.scaled_dot_product_attention(
            grid_q.transpose(1, 2), k, v, attn_mask=mask[:, None], scale=scale, enable_gqa=H != self.n_kv_head
        )  # (B, H, S, d)
        return self.c_proj(y.transpose(1, 2)[rows, slots].reshape(N, C))  # (N, C)


class MLP(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    def __init__(self, config, layer_idx: int, arch: Architecture) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(config, layer_idx, arch)
        self.mlp = MLP(config)
        self.checkpointed = (
            False  # keep only the inputs, rerun the forward in the backward (rlab.activation_checkpointing)
        )

    def forward(self, x: torch.Tensor, layer: LayerInputs) -> torch.Tensor:
        if self.checkpointed and layer.kv_cache is None and torch.is_grad_enabled():
            # non-reentrant: torch.compile traces it, and saved-tensor hooks see the inputs it keeps
            return checkpoint(self._forward, x, layer, use_reentrant=False)
        return self._forward(x, layer)

    def _forward(self, x: torch.Tensor, layer: LayerInputs) -> torch.Tensor:
        x = x + self.attn(norm(x), layer)
        x = x + self.mlp(norm(x))
        return x

    def forward_at(
        self, x: torch.Tensor, layer: LayerInputs, at: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """`forward`'s output (N, C) at positions at = (rows, cols) of x (B, T, C) only."""
        rows, cols = at
        out = x[rows, cols] + self.attn.attend_at(norm(x), layer, at)  # (N, C)
        return out + self.mlp(norm(out))
