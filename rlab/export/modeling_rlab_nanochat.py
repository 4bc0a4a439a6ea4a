"""nanochat-style GPTs (both generations) for Hugging Face transformers, as `rlab export --format hf` ships them.

This file travels inside an exported folder and is loaded with `trust_remote_code=True`; it imports only torch
and transformers (never rlab), so the folder works wherever transformers does:

    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)

It is used where transformers' own `NanoChatForCausalLM` cannot hold the model: nanochat-2026 (value embeddings
with per-head gates, residual/x0 scalars, smear, backout, sliding windows, q/k scaled after the norm), an
attention temperature (YaRN, LongRoPE: transformers folds it into cos/sin, which the QK-norm after the rotation
erases; here it scales the softmax instead) or a RoPE that differs per layer type (`layers: global`).

The rotary parameters are transformers' own (`rope_parameters`, per layer type when `layer_types` name them),
evaluated by `modeling_rope_utils.ROPE_INIT_FUNCTIONS` at each forward's own length (dynamic and longrope depend
on it; a forward over T tokens uses the frequencies for T, as rlab does). There is no KV cache: the smear gate
reads the previous token's embedding, so generation recomputes the whole sequence each step (`use_cache=False`).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

SMEAR_CHANNELS = 24  # the smear gate reads the first 24 channels of the normed embedding
VALUE_GATE_CHANNELS = 12  # the value-embedding gate reads the first 12 channels of the block input


class RlabNanoChatConfig(PreTrainedConfig):
    """Shape, optional parts and RoPE of an exported nanochat-style GPT."""

    model_type = "rlab_nanochat"

    vocab_size: int = 50304
    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 6
    num_key_value_heads: int = 6
    max_position_embeddings: int = 2048
    rope_parameters: dict | None = None
    layer_types: list[str] | None = None  # full_attention / sliding_attention per layer
    window_sizes: list[int | None] | None = (
        None  # per layer: a query sees keys at most this far back; None = all
    )
    value_embed_layers: list[int] | None = None  # layers with a value embedding (and its gate)
    residual_scalars: bool = False  # resid_lambdas / x0_lambdas before every block
    smear: bool = False  # the previous token's embedding mixed in by a gate
    backout_layer: int | None = None  # the residual after this layer is subtracted before the final norm
    qk_scale: float = 1.0  # q and k times this after the QK-norm
    final_logit_softcapping: float = 15.0
    rms_norm_eps: float = 1.1920928955078125e-07  # torch's default for float32 (rlab and nanochat pass none)
    tie_word_embeddings: bool = False
    use_cache: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None


def rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, without learnable parameters."""
    return F.rms_norm(x, (x.size(-1),), eps=eps)


def layer_rope(config: RlabNanoChatConfig, layer_type: str) -> tuple[dict, str | None]:
    """(this layer type's rope parameters, the layer_type key to pass transformers, None for a flat dict)."""
    params = config.rope_parameters or {"rope_type": "default", "rope_theta": 10000.0}
    if layer_type in params and isinstance(params[layer_type], dict):
        return params[layer_type], layer_type
    return params, None


def inverse_frequencies(
    config: RlabNanoChatConfig, layer_type: str, seq_len: int, device: torch.device
) -> tuple[torch.Tensor, float]:
    """(inv_freq (d/2,) float32, attention factor) for one layer type at a forward of `seq_len` tokens."""
    params, key = layer_rope(config, layer_type)
    rope_type = params.get("rope_type", "default")
    head_dim = config.hidden_size // config.num_attention_heads
    if rope_type == "default":
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim
        return (float(params["rope_theta"]) ** -exponents).float(), 1.0
    inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, device, seq_len=seq_len, layer_type=key)
    return inv_freq.float(), float(factor)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (i, i + d/2) of x (B, T, H, d): y1 = x1 cos + x2 sin, y2 = x2 cos - x1 sin (nanochat's)."""
    half = x.size(-1) // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)


class RlabNanoChatAttention(nn.Module):
    def __init__(self, config: RlabNanoChatConfig, layer_idx: int) -> None:
        super().__init__()
        self.config = config
        self.n_head, self.n_kv_head = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        d = config.hidden_size
        self.q_proj = nn.Linear(d, self.n_head * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_head * self.head_dim, d, bias=False)
        with_ve = layer_idx in (config.value_embed_layers or [])
        self.ve_gate = nn.Linear(VALUE_GATE_CHANNELS, self.n_kv_head, bias=False) if with_ve else None

    def forward(
        self,
        x: torch.Tensor,
        ve: torch.Tensor | None,
        cos: torch.Tensor,
        sin: torch.Tensor,
        scale: float,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """x (B, T, C) the normed block input; cos, sin (T, d/2); mask (B, 1, T, T) bool, True = may attend."""
        B, T, C = x.shape
        eps, qk = self.config.rms_norm_eps, self.config.qk_scale
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        q = rms_norm(rotate(self.q_proj(x).view(B, T, self.n_head, self.head_dim), c, s), eps) * qk
        k = rms_norm(rotate(self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim), c, s), eps) * qk
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim)
        if self.ve_gate is not None and ve is not None:
            gate = 3 * torch.sigmoid(self.ve_gate(x[..., :VALUE_GATE_CHANNELS]))  # (B, T, H_kv)
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_kv_head, self.head_dim)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=mask,
            scale=scale,
            enable_gqa=self.n_head != self.n_kv_head,
        )  # (B, H, T, d)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C))


class RlabNanoChatMLP(nn.Module):
    def __init__(self, config: RlabNanoChatConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)).square())


class RlabNanoChatBlock(nn.Module):
    def __init__(self, config: RlabNanoChatConfig, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = RlabNanoChatAttention(config, layer_idx)
        self.mlp = RlabNanoChatMLP(config)
        self.eps = config.rms_norm_eps

    def forward(self, x, ve, cos, sin, scale, mask) -> torch.Tensor:
        x = x + self.self_attn(rms_norm(x, self.eps), ve, cos, sin, scale, mask)
        return x + self.mlp(rms_norm(x, self.eps))


class RlabNanoChatPreTrainedModel(PreTrainedModel):
    config_class = RlabNanoChatConfig
    base_model_prefix = "model"
    _no_split_modules = ["RlabNanoChatBlock"]
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        """Exported weights are always loaded; fresh modules get a small normal init (scalars: identity)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        elif isinstance(module, RlabNanoChatModel) and module.resid_lambdas is not None:
            assert module.x0_lambdas is not None  # the two come together
            nn.init.ones_(module.resid_lambdas)
            nn.init.zeros_(module.x0_lambdas)


class RlabNanoChatModel(RlabNanoChatPreTrainedModel):
    config: RlabNanoChatConfig

    def __init__(self, config: RlabNanoChatConfig) -> None:
        super().__init__(config)
        n, kv_dim = (
            config.num_hidden_layers,
            config.num_key_value_heads * (config.hidden_size // config.num_attention_heads),
        )
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([RlabNanoChatBlock(config, i) for i in range(n)])
        self.value_embeds = nn.ModuleDict(
            {str(i): nn.Embedding(config.vocab_size, kv_dim) for i in (config.value_embed_layers or [])}
        )
        self.resid_lambdas = nn.Parameter(torch.ones(n)) if config.residual_scalars else None
        self.x0_lambdas = nn.Parameter(torch.zeros(n)) if config.residual_scalars else None
        self.smear_gate = nn.Linear(SMEAR_CHANNELS, 1, bias=False) if config.smear else None
        self.smear_lambda = nn.Parameter(torch.zeros(1)) if config.smear else None
        self.backout_lambda = nn.Parameter(torch.zeros(1)) if config.backout_layer is not None else None
        self.post_init()

    def _rotary(self, T: int, device: torch.device) -> dict[str, tuple[torch.Tensor, torch.Tensor, float]]:
        """Per layer type: cos, sin (T, d/2) for positions 0..T-1 (angles in float64) and the softmax scale."""
        head_dim = self.config.hidden_size // self.config.num_attention_heads
        positions = torch.arange(T, dtype=torch.float64, device=device)
        tables = {}
        for layer_type in sorted(set(self._layer_types())):
            inv_freq, factor = inverse_frequencies(self.config, layer_type, T, device)
            angles = torch.outer(positions, inv_freq.double())
            tables[layer_type] = (angles.cos().float(), angles.sin().float(), factor**2 / math.sqrt(head_dim))
        return tables

    def _layer_types(self) -> list[str]:
        return list(self.config.layer_types or ["full_attention"] * self.config.num_hidden_layers)

    def _masks(self, T: int, attention_mask: torch.Tensor | None, device: torch.device) -> list[torch.Tensor]:
        """Per layer (B or 1, 1, T, T) bool: causal, within the layer's window, keys not padding (self always)."""
        i = torch.arange(T, device=device)
        distance = i[:, None] - i[None, :]  # query - key
        keys = attention_mask.bool()[:, None, None, :] if attention_mask is not None else None
        masks: dict[int | None, torch.Tensor] = {}
        out = []
        for window in self.config.window_sizes or [None] * self.config.num_hidden_layers:
            if window not in masks:
                allowed = (distance >= 0) & (distance <= window) if window is not None else distance >= 0
                mask = allowed[None, None]
                if keys is not None:
                    mask = (mask & keys) | torch.eye(T, dtype=torch.bool, device=device)
                masks[window] = mask
            out.append(masks[window])
        return out

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = rms_norm(self.embed_tokens(input_ids), self.config.rms_norm_eps)  # (B, T, C)
        if self.smear_gate is None or self.smear_lambda is None or x.size(1) < 2:
            return x
        gate = self.smear_lambda * torch.sigmoid(self.smear_gate(x[:, 1:, :SMEAR_CHANNELS]))  # (B, T-1, 1)
        return torch.cat([x[:, :1], x[:, 1:] + gate * x[:, :-1]], dim=1)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs
    ) -> torch.Tensor:
        """input_ids (B, T) -> the final-normed hidden states (B, T, C)."""
        B, T = input_ids.shape
        tables = self._rotary(T, input_ids.device)
        masks = self._masks(T, attention_mask, input_ids.device)
        x = x0 = self._embed(input_ids)
        backout = None
        for i, (block, layer_type) in enumerate(zip(self.layers, self._layer_types(), strict=True)):
            if self.resid_lambdas is not None and self.x0_lambdas is not None:
                x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = self.value_embeds[str(i)](input_ids) if str(i) in self.value_embeds else None
            cos, sin, scale = tables[layer_type]
            x = block(x, ve, cos, sin, scale, masks[i])
            if i == self.config.backout_layer:
                backout = x
        if backout is not None and self.backout_lambda is not None:
            x = x - self.backout_lambda * backout
        return rms_norm(x, self.config.rms_norm_eps)


class RlabNanoChatForCausalLM(RlabNanoChatPreTrainedModel, GenerationMixin):
    def __init__(self, config: RlabNanoChatConfig) -> None:
        super().__init__(config)
        self.model = RlabNanoChatModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        hidden = self.model(input_ids, attention_mask)
        cap = self.config.final_logit_softcapping
        logits = cap * torch.tanh(self.lm_head(hidden).float() / cap)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        """No KV cache: every step sees the whole sequence (the smear gate needs the previous token)."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}
