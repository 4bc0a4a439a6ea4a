"""The GPT model: nanochat's architectures (2025 and 2026 generations), with pluggable RoPE variants.

Always (both generations):
- rotary position embeddings only (no learned positions); the variant comes from a `RopeSpec`
- RMSNorm without learnable parameters: after the token embedding, before each sub-block,
  on q and k (QK-norm, applied *after* the rotation), and before the lm_head
- pre-norm blocks, q/k/v/out projections with grouped-query attention, a relu(x)^2 MLP
  (`rlab.core.blocks`); no biases; untied token embedding and lm_head
- vocab padded up to a multiple of 64 in wte and lm_head (the padding is sliced off the logits)
- logits soft-capped as 15 * tanh(logits / 15), computed in fp32 (the training loss runs this head
  chunked and fused, `rlab.core.head_loss`; causal attention picks its kernel in `rlab.core.attention`)

Optional parts, switched on by the architecture (`rlab.core.architecture`; all on for nanochat-2026):
- smear: x[t] += smear_lambda * sigmoid(smear_gate(x[t, :24])) * x[t-1] on the normed embedding
- resid/x0 lambdas: before block i, x = resid_lambdas[i] * x + x0_lambdas[i] * x0 (x0 = the smeared embedding)
- value embeddings on alternating layers, the last included, gated per kv head (in the block)
- backout: the residual after block n_layer // 2, times backout_lambda, subtracted before the final norm
- sliding windows: per layer, a query sees at most `window` tokens back (`windows_at`: as trained up to
  sequence_len; beyond it as `set_eval_windows` says, see `rlab.core.architecture.eval_window_sizes`)
- q and k times `qk_scale` after the QK-norm; the rotary base (10000 / 100000) fills the RoPE spec

State-dict keys are nanochat's (`transformer.wte.weight`, `transformer.h.{i}.attn.c_q.weight`, ...,
`value_embeds.{i}.weight`, `smear_gate.weight`, ...), so `load_nanochat_state_dict` takes a nanochat
`model_XXXXXX.pt` unchanged. The shape is `rlab.core.gpt_config.GPTConfig`; each layer's rotary tables and
attention mask come from `rlab.core.layer_positions` (built lazily, `rlab.core.rope.RotaryTables`, never
saved). YaRN's attention temperature reaches the logits through SDPA's `scale` argument, because
QK-norm would erase it anywhere before (see `rlab.core.rope`).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask

from rlab.activation_checkpointing import checkpointed_layers
from rlab.core.architecture import has_value_embed, key_list
from rlab.core.attention import SlidingWindow, WindowKernel
from rlab.core.blocks import Block, KVCache, LayerInputs, norm
from rlab.core.gpt_config import GPTConfig
from rlab.core.head_loss import softcap_cross_entropy
from rlab.core.layer_positions import LayerPositions
from rlab.errors import CheckpointError
from rlab.nanochat.generations import get_architecture
from rlab.nanochat.state_dict import strip_compile_prefix
from rlab.spec.eval import AttentionWindows
from rlab.spec.rope import RopeSpec

# GPTConfig and KVCache are defined beside the model (gpt_config, blocks) and used with it, so they come from here too
__all__ = ["GPT", "GPTConfig", "KVCache", "LOGIT_SOFTCAP"]

LOGIT_SOFTCAP = 15.0  # logits = cap * tanh(logits / cap)
SMEAR_GATE_CHANNELS = 24  # nanochat-2026: the smear gate reads the first 24 channels of the embedding


class GPT(nn.Module, LayerPositions):
    """nanochat-style GPT. `rope=None` means plain rope with L0 = `config.sequence_len`."""

    def __init__(self, config: GPTConfig, rope: RopeSpec | None = None) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.arch = arch = get_architecture(config.architecture)
        vocab, n_layer = config.padded_vocab_size, config.n_layer
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab, config.n_embd),
                "h": nn.ModuleList([Block(config, i, arch) for i in range(n_layer)]),
            }
        )
        self.lm_head = nn.Linear(config.n_embd, vocab, bias=False)
        # --- optional parts (nanochat-2026); None where the architecture has none ---
        self.resid_lambdas = nn.Parameter(torch.ones(n_layer)) if arch.residual_scalars else None
        self.x0_lambdas = nn.Parameter(torch.zeros(n_layer)) if arch.residual_scalars else None
        self.smear_gate = nn.Linear(SMEAR_GATE_CHANNELS, 1, bias=False) if arch.smear else None
        self.smear_lambda = nn.Parameter(torch.zeros(1)) if arch.smear else None
        self.backout_lambda = nn.Parameter(torch.full((1,), 0.2)) if arch.backout else None
        self.backout_layer = n_layer // 2 if arch.backout else None
        kv_dim = config.n_kv_head * config.head_dim
        self.value_embeds = (
            nn.ModuleDict(
                {str(i): nn.Embedding(vocab, kv_dim) for i in range(n_layer) if has_value_embed(i, n_layer)}
            )
            if arch.value_embeds
            else None
        )
        self.window_kernel: WindowKernel = "auto"  # how sliding-window layers attend (rlab.core.attention)
        self._block_masks: dict[tuple[int, int, int, str], BlockMask] = {}  # FlexAttention's, by shape
        self.eval_windows: AttentionWindows = "capped"
        self.set_rope(rope if rope is not None else RopeSpec())

    # --- precision ---

    @property
    def stream_dtype(self) -> torch.dtype:
        """The residual stream's dtype: the token embedding's (`set_stream_dtype`), as in nanochat."""
        wte = self.transformer.wte
        assert isinstance(wte, nn.Embedding)
        return wte.weight.dtype

    def set_stream_dtype(self, dtype: torch.dtype) -> None:
        """Keep wte, the value embeddings and the residual stream in `dtype` (bf16 on a GPU halves their
        memory and the stream's saved activations, as nanochat does: `rlab.core.precision`); fp32 (the
        default) is the reference. Matrices stay fp32 (autocast runs their matmuls), and a bf16 stream
        needs autocast on for them. State dicts keep the parameters' dtype, as nanochat's do."""
        self.transformer.wte.to(dtype=dtype)
        for ve in (self.value_embeds or {}).values():
            ve.to(dtype=dtype)

    def set_activation_checkpointing(self, setting: str) -> None:
        """Checkpoint the blocks a resolved setting names (`rlab.activation_checkpointing`: off, all, every-k);
        only a forward with grad and no KV cache recomputes, so evals and decoding are unchanged."""
        layers = checkpointed_layers(setting, self.config.n_layer)
        for i, block in enumerate(self.transformer.h):  # type: ignore[arg-type]
            block.checkpointed = i in layers

    # --- initialisation ---

    @torch.no_grad()
    def init_weights(self) -> None:
        """From-scratch initialisation.

        Embedding rows ~ N(0, 1) (the embedding is RMS-normalised right away, so unit scale is natural).
        Input-side matrices (q, k, v, MLP up-projection) ~ U(-a, a) with a = sqrt(3 / n_embd), i.e.
        std 1/sqrt(fan_in), which keeps activations O(1) after the norm. Every matrix that writes into
        the residual stream (attention and MLP output projections) and the lm_head start at zero, so
        each block starts as the identity and the initial prediction is uniform. The optional parts
        start as nanochat-2026 starts them: value embeddings like c_v, gates U(0, 0.02), resid
        1.15 -> 1.05 and x0 0.20 -> 0.05 over depth, smear_lambda 0, backout_lambda 0.2.
        """
        nn.init.normal_(self.transformer.wte.weight, mean=0.0, std=1.0)  # type: ignore[union-attr,arg-type]
        bound = math.sqrt(3.0 / self.config.n_embd)
        for block in self.transformer.h:  # type: ignore[union-attr]  # ModuleDict members are untyped
            for lin in (block.attn.c_q, block.attn.c_k, block.attn.c_v, block.mlp.c_fc):
                nn.init.uniform_(lin.weight, -bound, bound)
            nn.init.zeros_(block.attn.c_proj.weight)
            nn.init.zeros_(block.mlp.c_proj.weight)
            if block.attn.ve_gate is not None:
                nn.init.uniform_(block.attn.ve_gate.weight, 0.0, 0.02)
        nn.init.zeros_(self.lm_head.weight)
        n_layer = self.config.n_layer
        depth = torch.arange(n_layer, dtype=torch.float32) / max(n_layer - 1, 1)
        if self.resid_lambdas is not None and self.x0_lambdas is not None:
            self.resid_lambdas.copy_(1.15 - 0.10 * depth)
            self.x0_lambdas.copy_(0.20 - 0.15 * depth)
        if self.smear_gate is not None and self.smear_lambda is not None:
            nn.init.uniform_(self.smear_gate.weight, 0.0, 0.02)
            nn.init.zeros_(self.smear_lambda)
        if self.backout_lambda is not None:
            nn.init.constant_(self.backout_lambda, 0.2)
        for ve in (self.value_embeds or {}).values():
            nn.init.uniform_(ve.weight, -bound, bound)  # type: ignore[arg-type]

    # --- forward ---

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        kv_cache: KVCache | None = None,
        loss_reduction: str = "mean",
        last_logits: bool = False,
    ) -> torch.Tensor:
        """idx (B, T) long -> logits (B, T, vocab_size) fp32; with targets (-1 = ignore) -> the loss.

        `loss_reduction="none"` returns per-token losses (B*T,) (0 at ignored targets), for BPB.
        `last_logits`: the last position's logits only, (B, 1, vocab_size): a prefill before decoding
        reads nothing else (the full fp32 logits at 16k tokens would take 4 GiB per row).
        """
        B, T = idx.shape
        start = kv_cache.pos if kv_cache is not None else 0
        freq_len = kv_cache.freq_len(T) if kv_cache is not None else T
        cos_sin = self._rotations(start, T, idx.device, freq_len)  # per layer: (1, T, 1, d/2) each

        x = self._embed(idx, kv_cache)  # (B, T, C)
        masks = self._layer_masks(T, start, idx.device, length=freq_len)
        x = self._trunk(x, idx, cos_sin, kv_cache, masks)
        if kv_cache is not None:
            kv_cache.advance(T)

        if targets is None:
            return self.logits_at(x[:, -1:] if last_logits else x)  # (B, T or 1, V) fp32
        if loss_reduction == "none" and torch.is_grad_enabled():
            # Per-token losses to differentiate (nothing trains on these): the plain path.
            logits = self.logits_at(x)
            return F.cross_entropy(
                logits.view(-1, logits.size(-1)),
                targets.reshape(-1),
                ignore_index=-1,
                reduction=loss_reduction,
            )
        # The same loss, chunked, with the head's gradients formed in one pass; eager also under torch.compile,
        # so the compiled backward never keeps the (tokens x vocab) logits (see rlab.core.head_loss).
        return softcap_cross_entropy(
            x.reshape(B * T, -1),
            self.lm_head.weight,
            targets.reshape(-1),
            self.config.vocab_size,
            LOGIT_SOFTCAP,
            loss_reduction,
        )

    def _embed(
        self, idx: torch.Tensor, kv_cache: KVCache | None = None, prev_index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """idx (B, T) -> the normed token embedding (B, T, C), smeared where the architecture smears.

        The previous token is t-1 in a plain row, `prev_index` (B, T) (-1 = none) in a packed one, and the
        cache's last embedding for the first token after a cached prefix.
        """
        x = norm(self.transformer.wte(idx))  # type: ignore[operator]  # (B, T, C), in the stream's dtype (wte's)
        if self.smear_gate is None or self.smear_lambda is None:
            return x
        prev = kv_cache.prev_embedding if kv_cache is not None else None
        if kv_cache is not None:
            kv_cache.prev_embedding = x[:, -1:, :]
        lam = self.smear_lambda.to(x.dtype)
        if prev_index is not None:
            gate = lam * torch.sigmoid(self.smear_gate(x[..., :SMEAR_GATE_CHANNELS]))  # (B, T, 1)
            before = x.gather(1, prev_index.clamp(min=0)[..., None].expand(-1, -1, x.size(-1)))  # (B, T, C)
            return torch.where(prev_index[..., None] >= 0, x + gate * before, x)
        head = x[:, :1]
        if prev is not None:  # the first token continues a cached prefix
            head = head + lam * torch.sigmoid(self.smear_gate(head[..., :SMEAR_GATE_CHANNELS])) * prev
        if x.size(1) == 1:
            return head
        gate = lam * torch.sigmoid(self.smear_gate(x[:, 1:, :SMEAR_GATE_CHANNELS]))  # (B, T-1, 1)
        return torch.cat([head, x[:, 1:] + gate * x[:, :-1]], dim=1)

    def _trunk(
        self,
        x: torch.Tensor,
        idx: torch.Tensor,
        cos_sin: list[tuple[torch.Tensor, torch.Tensor]],
        kv_cache: KVCache | None,
        masks: list[torch.Tensor | SlidingWindow | None],
        at: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The blocks over the embedding x (B, T, C) -> final-normed hidden states (B, T, C), or (N, C) at
        `at` = (rows, cols), where the last block runs at those positions only."""
        x0 = x
        x_backout = None
        last = self.config.n_layer - 1
        for i, block in enumerate(self.transformer.h):  # type: ignore[arg-type]
            if self.resid_lambdas is not None and self.x0_lambdas is not None:
                x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = (
                self.value_embeds[str(i)](idx).to(x.dtype)
                if self.value_embeds and str(i) in self.value_embeds
                else None
            )
            layer = LayerInputs(ve, cos_sin[i], self._softmax_scales[i], kv_cache, masks[i])
            if at is not None and i == last:
                x = block.forward_at(x, layer, at)  # (N, C)
            else:
                x = block(x, layer)
            if i == self.backout_layer:
                x_backout = x
        if x_backout is not None and self.backout_lambda is not None:
            if at is not None and x_backout.dim() == 3:
                x_backout = x_backout[at[0], at[1]]  # (N, C)
            x = x - self.backout_lambda.to(x.dtype) * x_backout
        return norm(x)

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
        causal mask (a token's previous token, for the smear gate, is the nearest earlier one it may
        attend to), and `freq_len` is the sequence length length-dependent RoPE variants are
        evaluated at (default: T, as `forward`).

        `at` = (rows, cols), (N,) long each with rows non-decreasing, returns only those positions
        (N, C), and runs the last block there only: earlier blocks' outputs feed later keys and values
        everywhere, but the last block's output is read by nothing but the lm_head (and backout).
        """
        B, T = idx.shape
        freq_len = T if freq_len is None else freq_len
        cos_sin = self._rotations(0, T, idx.device, freq_len, positions)  # per layer
        prev_index = (
            _previous_visible(attn_mask) if attn_mask is not None and self.smear_gate is not None else None
        )
        x = self._embed(idx, prev_index=prev_index)  # (B, T, C)
        masks = self._layer_masks(T, 0, idx.device, attn_mask, positions, length=freq_len)
        return self._trunk(x, idx, cos_sin, None, masks, at)

    def logits_at(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (..., C) from `hidden_states` -> soft-capped fp32 logits (..., vocab_size), as `forward`
        computes them; pass only the rows you need to skip the lm_head elsewhere."""
        logits = self.lm_head(hidden)[..., : self.config.vocab_size].float()  # (..., V)
        return LOGIT_SOFTCAP * torch.tanh(logits / LOGIT_SOFTCAP)

    # --- checkpoints ---

    def load_nanochat_state_dict(
        self, state_dict: dict[str, torch.Tensor], source: str = "state dict"
    ) -> None:
        """Load a nanochat state dict (an optional `_orig_mod.` prefix is stripped; bf16 tensors are
        upcast to the parameters' dtype); CheckpointError naming `source` and the bad keys on mismatch."""
        cleaned = strip_compile_prefix(state_dict)
        expected = self.state_dict()
        missing = sorted(set(expected) - set(cleaned))
        unexpected = sorted(set(cleaned) - set(expected))
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing keys: {key_list(missing)}")
            if unexpected:
                parts.append(f"unexpected keys: {key_list(unexpected)}")
            raise CheckpointError(
                f"{source} does not fit this {self.arch.name} model ({'; '.join(parts)}).",
                f"The model expects nanochat's keys for {self.arch.name} with n_layer={self.config.n_layer}.",
            )
        bad_shapes = [
            f"{k} {tuple(cleaned[k].shape)} != {tuple(v.shape)}"
            for k, v in expected.items()
            if tuple(cleaned[k].shape) != tuple(v.shape)
        ]
        if bad_shapes:
            raise CheckpointError(
                f"{source}: tensor shapes do not fit this model: {key_list(bad_shapes)} (checkpoint != model).",
                f"Model config: {self.config.to_dict()} (padded vocab {self.config.padded_vocab_size}).",
            )
        self.load_state_dict(cleaned, strict=True)

    # --- accounting ---

    def estimate_flops(self) -> float:
        """FLOPs per token for forward+backward: 6 per matmul weight, plus attention's 12*H*d*T per layer.

        Embeddings (token and value) are lookups and the per-layer scalars are not matmuls, so they are
        excluded (the lm_head is included). T is `config.sequence_len`, capped per layer by its window;
        the attention term counts the full T x T score matrix (upper bound for causal attention), the
        usual convention for MFU (PaLM, arXiv 2204.02311, appendix B).
        """
        c = self.config
        lookups: list[torch.Tensor] = [
            self.transformer.wte.weight,  # type: ignore[union-attr,list-item]
            *(self.value_embeds.parameters() if self.value_embeds else []),
        ]
        scalars = [
            p
            for p in (self.resid_lambdas, self.x0_lambdas, self.smear_lambda, self.backout_lambda)
            if p is not None
        ]
        n_matmul = self.num_params() - sum(p.numel() for p in lookups + scalars)
        attention = sum(
            12 * c.n_head * c.head_dim * min(w or c.sequence_len, c.sequence_len) for w in self.window_sizes
        )
        return float(6 * n_matmul + attention)

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by optimizer role, as nanochat groups them: transformer matrices (Muon; the value
        gates live in the blocks, so they are matrices too), then AdamW groups: embedding, lm_head, and
        for nanochat-2026 value_embeds, resid (resid_lambdas), x0 (x0_lambdas) and smear (smear gate,
        smear_lambda, backout_lambda)."""
        groups = {
            "matrix": list(self.transformer.h.parameters()),  # type: ignore[union-attr]
            "embedding": list(self.transformer.wte.parameters()),  # type: ignore[union-attr]
            "lm_head": list(self.lm_head.parameters()),
        }
        if self.value_embeds is not None:
            groups["value_embeds"] = list(self.value_embeds.parameters())
        if self.resid_lambdas is not None:
            groups["resid"] = [self.resid_lambdas]
            groups["x0"] = [self.x0_lambdas]
        smear = [
            p
            for p in (
                self.smear_gate.weight if self.smear_gate is not None else None,
                self.smear_lambda,
                self.backout_lambda,
            )
            if p is not None
        ]
        if smear:
            groups["smear"] = smear
        assert sum(len(g) for g in groups.values()) == len(list(self.parameters())), (
            "a parameter has no group"
        )
        return groups

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _previous_visible(attn_mask: torch.Tensor) -> torch.Tensor:
    """attn_mask (B, 1, T, T) -> (B, T) index of the nearest earlier position each token may attend to
    (its previous token in its own sequence of a packed row), -1 for none."""
    T = attn_mask.size(-1)
    cols = torch.arange(T, device=attn_mask.device)
    earlier = attn_mask[:, 0] & (cols[None, :] < cols[:, None])[None]  # (B, T, T)
    return torch.where(earlier, cols + 1, 0).amax(dim=-1) - 1  # (B, T)
