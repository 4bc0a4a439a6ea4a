"""The GPT model: nanochat's late-2025 architecture, written here, with pluggable RoPE variants.

Architecture choices (the ones a nanochat checkpoint relies on):
- rotary position embeddings only (no learned positions); the variant comes from a `RopeSpec`
- RMSNorm without learnable parameters: after the token embedding, before each sub-block,
  on q and k (QK-norm, applied *after* the rotation), and before the lm_head
- pre-norm blocks: x = x + attn(norm(x)); x = x + mlp(norm(x))
- attention with separate q/k/v/out projections, grouped-query attention (n_kv_head <= n_head)
- MLP with a 4x hidden layer and relu(x)^2
- no biases anywhere; untied token embedding and lm_head
- vocab padded up to a multiple of 64 in wte and lm_head (the padding is sliced off the logits)
- logits soft-capped as 15 * tanh(logits / 15), computed in fp32 (the training loss runs this head
  chunked and fused, `rlab.core.head_loss`; causal attention picks its kernel in `rlab.core.attention`)

State-dict keys are nanochat's (`transformer.wte.weight`, `transformer.h.{i}.attn.c_q.weight`, ...,
`lm_head.weight`), so `load_nanochat_state_dict` takes a nanochat `model_XXXXXX.pt` unchanged.
Rotary tables are plain attributes built lazily (`rlab.core.rope.RotaryTables`), never saved.
YaRN's attention temperature reaches the logits through SDPA's `scale` argument, because
QK-norm would erase it anywhere before (see `rlab.core.rope`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from rlab.core import rope as rope_lib
from rlab.core.attention import causal_attention
from rlab.core.head_loss import softcap_cross_entropy
from rlab.errors import CheckpointError, SpecError
from rlab.spec.rope import RopeSpec

log = logging.getLogger(__name__)

VOCAB_PAD_MULTIPLE = 64  # nanochat pads the vocab so the lm_head matmul tiles well on GPUs
LOGIT_SOFTCAP = 15.0  # logits = cap * tanh(logits / cap)
COMPILE_PREFIX = "_orig_mod."  # torch.compile wraps the module and prefixes every key with this


@dataclass
class GPTConfig:
    """Model shape; mirrors nanochat's meta["model_config"], so a nanochat meta JSON builds the right model."""

    sequence_len: int = 1024  # training context length; the default original length L0 for RoPE scaling
    vocab_size: int = 50304  # real vocab size (wte/lm_head are padded up to a multiple of 64)
    n_layer: int = 12  # transformer blocks
    n_head: int = 6  # query heads
    n_kv_head: int = 6  # key/value heads (GQA: n_head must be a multiple of it)
    n_embd: int = 768  # residual width; head_dim = n_embd // n_head

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GPTConfig:
        """Build from a dict such as nanochat's `model_config`; unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def padded_vocab_size(self) -> int:
        return -(-self.vocab_size // VOCAB_PAD_MULTIPLE) * VOCAB_PAD_MULTIPLE

    def validate(self) -> None:
        """One-line errors naming the field; `assert` is not for user input."""
        for name in ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd"):
            if getattr(self, name) <= 0:
                raise SpecError(f"model_config.{name}: must be > 0 (got {getattr(self, name)})")
        if self.n_embd % self.n_head:
            raise SpecError(f"model_config.n_embd: must be divisible by n_head={self.n_head} (got {self.n_embd})")
        if self.n_head % self.n_kv_head:
            raise SpecError(
                f"model_config.n_kv_head: must divide n_head={self.n_head} (got {self.n_kv_head})"
            )
        rope_lib.check_head_dim(self.head_dim)


def norm(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dim, no learnable parameters."""
    return F.rms_norm(x, (x.size(-1),))


class KVCache:
    """Per-layer keys and values for incremental decoding; grows on demand.

    `pos` is the number of tokens already cached (the position of the next token). `seq_len` is
    the planned total length, if known: it is the initial capacity and the length at which
    length-dependent RoPE variants (dynamic-ntk) are evaluated, so that decoding token by token
    uses exactly the frequencies of one full forward over `seq_len` tokens.
    """

    def __init__(
        self,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        num_layers: int,
        device: torch.device | str,
        dtype: torch.dtype,
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
        self._capacity = 0
        self._k: list[torch.Tensor] = []
        self._v: list[torch.Tensor] = []
        if seq_len:
            self._grow(seq_len)

    def _grow(self, needed: int) -> None:
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
        if stop > self._capacity:
            self._grow(stop)
        self._k[layer][:, :, self.pos : stop] = k
        self._v[layer][:, :, self.pos : stop] = v
        return self._k[layer][:, :, :stop], self._v[layer][:, :, :stop]

    def advance(self, num_tokens: int) -> None:
        """Called by the model once all layers have inserted this step's tokens."""
        self.pos += num_tokens

    def reset(self) -> None:
        self.pos = 0

    def freq_len(self, num_new: int) -> int:
        """The sequence length at which length-dependent RoPE frequencies are evaluated."""
        return max(self.seq_len or 0, self.pos + num_new)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.n_head = config.n_head
        self.n_kv_head = config.n_kv_head
        self.head_dim = config.head_dim
        d = config.n_embd
        self.c_q = nn.Linear(d, self.n_head * self.head_dim, bias=False)
        self.c_k = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.c_v = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        scale: float,
        kv_cache: KVCache | None,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`attn_mask` (B, 1, T, T) bool, True = may attend, replaces the causal mask (no kv_cache)."""
        B, T, C = x.shape
        cos, sin = cos_sin
        q = _rotate_norm(self.c_q(x).view(B, T, self.n_head, self.head_dim), cos, sin)  # (B, T, H, d)
        k, v = self._keys_values(x, cos, sin)  # (B, H_kv, T, d) each
        q = q.transpose(1, 2)  # (B, H, T, d)

        if kv_cache is not None:
            k, v = kv_cache.insert(self.layer_idx, k, v)  # (B, H_kv, Tk, d)
            k, v = k.to(q.dtype), v.to(q.dtype)
        Tq, Tk = q.size(2), k.size(2)
        gqa = self.n_head != self.n_kv_head
        if attn_mask is not None:
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

    def _keys_values(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> rotated, QK-normed keys and values, (B, H_kv, T, d) each."""
        B, T, _ = x.shape
        k = _rotate_norm(self.c_k(x).view(B, T, self.n_kv_head, self.head_dim), cos, sin)  # (B, T, H_kv, d)
        v = self.c_v(x).view(B, T, self.n_kv_head, self.head_dim)  # (B, T, H_kv, d)
        return k.transpose(1, 2), v.transpose(1, 2)

    def attend_at(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        scale: float,
        attn_mask: torch.Tensor | None,
        at: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        """`forward`'s output (N, C) at positions at = (rows, cols) of x (B, T, C) only; rows non-decreasing.

        Keys and values come from every position, queries only from the selected ones, placed in a
        (B, S) grid (S = the most queries any row has) so one attention call serves all rows. Unused
        grid slots query position 0, which every mask lets see itself.
        """
        rows, cols = at
        B, T, C = x.shape
        H, d = self.n_head, self.head_dim
        cos, sin = cos_sin
        k, v = self._keys_values(x, cos, sin)  # (B, H_kv, T, d) each
        N = rows.numel()
        cos_q = cos.expand(B, -1, -1, -1)[rows, cols].unsqueeze(1)  # (N, 1, 1, d/2)
        sin_q = sin.expand(B, -1, -1, -1)[rows, cols].unsqueeze(1)  # (N, 1, 1, d/2)
        q = _rotate_norm(self.c_q(x[rows, cols]).view(N, 1, H, d), cos_q, sin_q).view(N, H, d)  # (N, H, d)

        per_row = torch.bincount(rows, minlength=B)  # (B,)
        slots = torch.arange(N, device=x.device) - (per_row.cumsum(0) - per_row)[rows]  # (N,) index within its row
        n_slots = max(1, int(per_row.max())) if N else 1
        grid_q = q.new_zeros(B, n_slots, H, d)  # (B, S, H, d)
        grid_q[rows, slots] = q
        grid_col = torch.zeros(B, n_slots, dtype=torch.long, device=x.device)  # (B, S)
        grid_col[rows, slots] = cols
        if attn_mask is None:  # plain causal rows: the query at column c sees keys 0..c
            keys = torch.arange(T, device=x.device)  # (T,)
            mask = keys[None, None, :] <= grid_col[:, :, None]  # (B, S, T)
        else:
            mask = attn_mask[:, 0].gather(1, grid_col[:, :, None].expand(-1, -1, T))  # (B, S, T)
        y = F.scaled_dot_product_attention(
            grid_q.transpose(1, 2), k, v, attn_mask=mask[:, None], scale=scale, enable_gqa=H != self.n_kv_head
        )  # (B, H, S, d)
        return self.c_proj(y.transpose(1, 2)[rows, slots].reshape(N, C))  # (N, C)


def _rotate_norm(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE, then QK-norm (nanochat's order): (..., T, H, d) -> same shape."""
    return norm(rope_lib.apply_rotary(t, cos, sin))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    def __init__(self, config: GPTConfig, layer_idx: int) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(config, layer_idx)
        self.mlp = MLP(config)

    def forward(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        scale: float,
        kv_cache: KVCache | None,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = x + self.attn(norm(x), cos_sin, scale, kv_cache, attn_mask)
        x = x + self.mlp(norm(x))
        return x

    def forward_at(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        scale: float,
        attn_mask: torch.Tensor | None,
        at: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        """`forward`'s output (N, C) at positions at = (rows, cols) of x (B, T, C) only."""
        rows, cols = at
        out = x[rows, cols] + self.attn.attend_at(norm(x), cos_sin, scale, attn_mask, at)  # (N, C)
        return out + self.mlp(norm(out))


class GPT(nn.Module):
    """nanochat-style GPT. `rope=None` means plain rope with L0 = `config.sequence_len`."""

    def __init__(self, config: GPTConfig, rope: RopeSpec | None = None) -> None:
        super().__init__()
        config.validate()
        self.config = config
        vocab = config.padded_vocab_size
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab, config.n_embd),
                "h": nn.ModuleList([Block(config, i) for i in range(config.n_layer)]),
            }
        )
        self.lm_head = nn.Linear(config.n_embd, vocab, bias=False)
        self.set_rope(rope if rope is not None else RopeSpec())

    # --- RoPE ---

    def set_rope(self, rope: RopeSpec) -> None:
        """Swap the RoPE variant (weights untouched); tables are rebuilt lazily at the next forward."""
        self.rope = rope.with_original_len(self.config.sequence_len)
        self._rotary = rope_lib.RotaryTables(self.rope, self.config.head_dim)
        self._softmax_scale = rope_lib.softmax_scale(self.rope, self.config.head_dim)
        if self.rope.variant.value != "rope":
            log.info("RoPE variant %s", self.rope.describe())

    # --- initialisation ---

    @torch.no_grad()
    def init_weights(self) -> None:
        """From-scratch initialisation.

        Embedding rows ~ N(0, 1) (the embedding is RMS-normalised right away, so unit scale is natural).
        Input-side matrices (q, k, v, MLP up-projection) ~ U(-a, a) with a = sqrt(3 / n_embd), i.e.
        std 1/sqrt(fan_in), which keeps activations O(1) after the norm. Every matrix that writes into
        the residual stream (attention and MLP output projections) and the lm_head start at zero, so
        each block starts as the identity and the initial prediction is uniform.
        """
        nn.init.normal_(self.transformer.wte.weight, mean=0.0, std=1.0)
        bound = math.sqrt(3.0 / self.config.n_embd)
        for block in self.transformer.h:
            for lin in (block.attn.c_q, block.attn.c_k, block.attn.c_v, block.mlp.c_fc):
                nn.init.uniform_(lin.weight, -bound, bound)
            nn.init.zeros_(block.attn.c_proj.weight)
            nn.init.zeros_(block.mlp.c_proj.weight)
        nn.init.zeros_(self.lm_head.weight)

    # --- forward ---

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        kv_cache: KVCache | None = None,
        loss_reduction: str = "mean",
    ) -> torch.Tensor:
        """idx (B, T) long -> logits (B, T, vocab_size) fp32; with targets (-1 = ignore) -> the loss.

        `loss_reduction="none"` returns per-token losses (B*T,) (0 at ignored targets), for BPB.
        """
        B, T = idx.shape
        start = kv_cache.pos if kv_cache is not None else 0
        freq_len = kv_cache.freq_len(T) if kv_cache is not None else T
        cos_sin = self._rotary.get(start, T, idx.device, freq_len)  # (1, T, 1, d/2) each, fp32

        x = norm(self.transformer.wte(idx))  # (B, T, C)
        for block in self.transformer.h:
            x = block(x, cos_sin, self._softmax_scale, kv_cache)
        x = norm(x)
        if kv_cache is not None:
            kv_cache.advance(T)

        if targets is None:
            return self.logits_at(x)  # (B, T, V) fp32
        if (loss_reduction == "none" and torch.is_grad_enabled()) or torch.compiler.is_compiling():
            # Per-token losses to differentiate, or torch.compile (which fuses this chain itself): the plain path.
            logits = self.logits_at(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1,
                                   reduction=loss_reduction)
        # The same loss, chunked, with the head's gradients formed in one pass (see rlab.core.head_loss).
        return softcap_cross_entropy(x.reshape(B * T, -1), self.lm_head.weight, targets.reshape(-1),
                                     self.config.vocab_size, LOGIT_SOFTCAP, loss_reduction)

    def hidden_states(
        self,
        idx: torch.Tensor,
        positions: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        freq_len: int | None = None,
        at: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """idx (B, T) -> the final-normed hidden states (B, T, C) that `forward` feeds the lm_head.

        With no extra arguments this is exactly `forward`'s trunk. For packed inputs (several
        sequences sharing a prefix in one row, as CORE scoring uses): `positions` (B, T) long are the
        rotary positions of each token, `attn_mask` (B, 1, T, T) bool (True = may attend) replaces the
        causal mask, and `freq_len` is the sequence length length-dependent RoPE variants are
        evaluated at (default: T, as `forward`).

        `at` = (rows, cols), (N,) long each with rows non-decreasing, returns only those positions
        (N, C), and runs the last block there only: earlier blocks' outputs feed later keys and values
        everywhere, but the last block's output is read by nothing but the lm_head.
        """
        B, T = idx.shape
        freq_len = T if freq_len is None else freq_len
        if positions is None:
            cos_sin = self._rotary.get(0, T, idx.device, freq_len)  # (1, T, 1, d/2) each
        else:
            cos, sin = self._rotary.get(0, int(positions.max()) + 1, idx.device, freq_len)  # (1, P, 1, d/2)
            cos_sin = (cos[0, positions], sin[0, positions])  # (B, T, 1, d/2) each
        x = norm(self.transformer.wte(idx))  # (B, T, C)
        blocks = list(self.transformer.h)
        if at is not None:
            *blocks, last = blocks
        for block in blocks:
            x = block(x, cos_sin, self._softmax_scale, None, attn_mask)
        if at is not None:
            x = last.forward_at(x, cos_sin, self._softmax_scale, attn_mask, at)  # (N, C)
        return norm(x)

    def logits_at(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (..., C) from `hidden_states` -> soft-capped fp32 logits (..., vocab_size), as `forward`
        computes them; pass only the rows you need to skip the lm_head elsewhere."""
        logits = self.lm_head(hidden)[..., : self.config.vocab_size].float()  # (..., V)
        return LOGIT_SOFTCAP * torch.tanh(logits / LOGIT_SOFTCAP)

    # --- checkpoints ---

    def load_nanochat_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load a nanochat state dict (an optional `_orig_mod.` prefix is stripped); CheckpointError on mismatch."""
        cleaned = {k.removeprefix(COMPILE_PREFIX): v for k, v in state_dict.items()}
        expected = self.state_dict()
        missing = sorted(set(expected) - set(cleaned))
        unexpected = sorted(set(cleaned) - set(expected))
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing keys: {_key_list(missing)}")
            if unexpected:
                parts.append(f"unexpected keys: {_key_list(unexpected)}")
            raise CheckpointError(
                f"State dict does not fit this model ({'; '.join(parts)}).",
                f"The model expects nanochat's keys for n_layer={self.config.n_layer}; "
                "check that the checkpoint's meta JSON matches its model file.",
            )
        bad_shapes = [
            f"{k} {tuple(cleaned[k].shape)} != {tuple(v.shape)}"
            for k, v in expected.items()
            if tuple(cleaned[k].shape) != tuple(v.shape)
        ]
        if bad_shapes:
            raise CheckpointError(
                f"State dict shapes do not fit this model: {_key_list(bad_shapes)} (checkpoint != model).",
                f"Model config: {self.config.to_dict()} (padded vocab {self.config.padded_vocab_size}).",
            )
        self.load_state_dict(cleaned, strict=True)

    # --- accounting ---

    def estimate_flops(self) -> float:
        """FLOPs per token for forward+backward: 6 per non-embedding weight, plus attention's 12*L*H*d*T.

        The embedding is a lookup, not a matmul, so it is excluded (the lm_head is included). T is
        `config.sequence_len`; the attention term counts the full T x T score matrix (upper bound
        for causal attention), the usual convention for MFU (PaLM, arXiv 2204.02311, appendix B).
        """
        n_params = sum(p.numel() for p in self.parameters())
        n_embedding = self.transformer.wte.weight.numel()
        c = self.config
        return float(6 * (n_params - n_embedding) + 12 * c.n_layer * c.n_head * c.head_dim * c.sequence_len)

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by optimizer role: transformer matrices (Muon), embedding and lm_head (AdamW)."""
        groups = {
            "matrix": list(self.transformer.h.parameters()),
            "embedding": list(self.transformer.wte.parameters()),
            "lm_head": list(self.lm_head.parameters()),
        }
        assert sum(len(g) for g in groups.values()) == len(list(self.parameters())), "a parameter has no group"
        return groups

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _key_list(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")
