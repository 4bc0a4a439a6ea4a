"""nanochat-style GPTs (both generations) for Hugging Face transformers, as `rlab export --format hf` ships them.

This file travels inside an exported folder and is loaded with `trust_remote_code=True`; it imports only torch
and transformers (never rlab), so the folder works wherever transformers does:

    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)

It is used where transformers' own `NanoChatForCausalLM` cannot hold the model: nanochat-2026 (value embeddings
with per-head gates, residual/x0 scalars, smear, backout, sliding windows, q/k scaled after the norm), an
attention temperature (YaRN, LongRoPE: transformers folds it into cos/sin, which the QK-norm after the rotation
erases; here it scales the softmax instead), a RoPE that differs per layer type (`layers: global`) or one whose
frequencies depend on the length (dynamic, longrope: see below).

Generation uses transformers' KV cache (`DynamicCache`; the config's `layer_types` / `sliding_window` make its
windowed layers keep only what a query can see). Positions come from the attention mask, so left-padded batches
decode as each row alone would; the smear gate reads the previous token, which `prepare_inputs_for_generation`
passes as `previous_token_ids` (a hand-driven cached forward must pass it too).

The rotary parameters are transformers' own (`rope_parameters`, per layer type when `layer_types` name them).
Length-dependent ones (dynamic, longrope) are evaluated at the length one forward over the whole sequence would
have: a plain forward at each row's own length, `generate` at prompt + new tokens from its first step (the
length it plans, recorded on the cache), so cached decoding equals recomputing everything, as rlab samples.
`dynamic` takes L0 from `rope_parameters["original_max_position_embeddings"]`; `max_position_embeddings` is the
length the model is meant to serve.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.cache_utils import DynamicCache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

SMEAR_CHANNELS = 24  # the smear gate reads the first 24 channels of the normed embedding
VALUE_GATE_CHANNELS = 12  # the value-embedding gate reads the first 12 channels of the block input
LENGTH_DEPENDENT = ("dynamic", "longrope")  # rope types whose frequencies depend on the sequence length
PLANNED_LENGTH = "rlab_planned_length"  # attribute `generate` sets on its cache: prompt + new tokens
# transformers renamed `past_key_values` to `cache` (5.x); this file speaks whichever the installed one does
CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


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
    sliding_window: int | None = (
        None  # sliding_attention layers: a query sees this many tokens, itself included
    )
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
    use_cache: bool = True
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None

    def _validate_dynamic_rope_parameters(self, rope_parameters, ignore_keys=None) -> None:
        """dynamic's L0 lives in rope_parameters here (transformers' own reads max_position_embeddings)."""
        keys = set(ignore_keys or ()) | {"original_max_position_embeddings"}
        super()._validate_dynamic_rope_parameters(rope_parameters, ignore_keys=keys)


def rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim, without learnable parameters."""
    return F.rms_norm(x, (x.size(-1),), eps=eps)


def layer_rope(config: RlabNanoChatConfig, layer_type: str) -> tuple[dict, str | None]:
    """(this layer type's rope parameters, the layer_type key to pass transformers, None for a flat dict)."""
    params = config.rope_parameters or {"rope_type": "default", "rope_theta": 10000.0}
    if layer_type in params and isinstance(params[layer_type], dict):
        return params[layer_type], layer_type
    return params, None


def plain_inverse_frequencies(theta: float, head_dim: int, device: torch.device) -> torch.Tensor:
    """theta^(-2i/d) (d/2,), formed in float64 as rlab forms it, returned in float32."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim
    return (float(theta) ** -exponents).float()


def inverse_frequencies(
    config: RlabNanoChatConfig, layer_type: str, seq_len: int, device: torch.device
) -> tuple[torch.Tensor, float]:
    """(inv_freq (d/2,) float32, attention factor) for one layer type at a forward of `seq_len` tokens."""
    params, key = layer_rope(config, layer_type)
    rope_type = params.get("rope_type", "default")
    head_dim = config.hidden_size // config.num_attention_heads
    if rope_type == "default":
        return plain_inverse_frequencies(params["rope_theta"], head_dim, device), 1.0
    if rope_type == "dynamic":  # L0 from rope_parameters, not max_position_embeddings (the served length)
        original, factor = params["original_max_position_embeddings"], params["factor"]
        length = max(seq_len, original)
        theta = params["rope_theta"] * ((factor * length / original) - (factor - 1)) ** (
            head_dim / (head_dim - 2)
        )
        return plain_inverse_frequencies(theta, head_dim, device), 1.0
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
        self.layer_idx = layer_idx
        self.n_head, self.n_kv_head = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        d = config.hidden_size
        self.q_proj = nn.Linear(d, self.n_head * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.n_kv_head * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_head * self.head_dim, d, bias=False)
        with_ve = layer_idx in (config.value_embed_layers or [])
        self.ve_gate = nn.Linear(VALUE_GATE_CHANNELS, self.n_kv_head, bias=False) if with_ve else None

    def forward(self, x, ve, cos, sin, scale, keys, cache) -> torch.Tensor:
        """x (B, T, C) the normed block input; cos, sin (B, T, d/2); keys: the `KeySlots` of this step."""
        B, T, C = x.shape
        eps, qk = self.config.rms_norm_eps, self.config.qk_scale
        c, s = cos[:, :, None, :], sin[:, :, None, :]
        q = rms_norm(rotate(self.q_proj(x).view(B, T, self.n_head, self.head_dim), c, s), eps) * qk
        k = rms_norm(rotate(self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim), c, s), eps) * qk
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim)
        if self.ve_gate is not None and ve is not None:
            gate = 3 * torch.sigmoid(self.ve_gate(x[..., :VALUE_GATE_CHANNELS]))  # (B, T, H_kv)
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_kv_head, self.head_dim)
        k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, H_kv, T, d)
        if cache is not None:
            k, v = cache.update(
                k, v, self.layer_idx
            )  # (B, H_kv, K, d): the cached keys a query may need, then these
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k,
            v,
            attn_mask=keys.mask(
                self.config.window_sizes[self.layer_idx] if self.config.window_sizes else None, k.size(2)
            ),
            scale=scale,
            enable_gqa=self.n_head != self.n_kv_head,
        )  # (B, H, T, d)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C))


class KeySlots:
    """Which keys a step's queries may attend to. Slots number the tokens of the (padded) rows from 0; this
    step's queries are slots past..past+T-1; a layer's cache hands back its last K slots, ending at the queries'."""

    def __init__(self, valid: torch.Tensor, past: int, T: int) -> None:
        self.valid, self.past, self.T = valid.bool(), past, T  # valid (B, past + T): 1 = a real token
        self._masks: dict[tuple[int | None, int], torch.Tensor] = {}

    def mask(self, window: int | None, K: int) -> torch.Tensor:
        """(B, 1, T, K) bool, True = may attend: causal, within `window` tokens back, keys not padding (self always)."""
        if (window, K) not in self._masks:
            device, end = self.valid.device, self.past + self.T
            queries = torch.arange(self.past, end, device=device)
            distance = queries[:, None] - torch.arange(end - K, end, device=device)[None, :]  # (T, K)
            allowed = distance >= 0 if window is None else (distance >= 0) & (distance <= window)
            keys = self.valid[:, None, None, end - K :]  # (B, 1, 1, K)
            self._masks[(window, K)] = (allowed[None, None] & keys) | (distance == 0)[None, None]
        return self._masks[(window, K)]


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

    def forward(self, x, ve, cos, sin, scale, keys, cache) -> torch.Tensor:
        x = x + self.self_attn(rms_norm(x, self.eps), ve, cos, sin, scale, keys, cache)
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

    def _layer_types(self) -> list[str]:
        return list(self.config.layer_types or ["full_attention"] * self.config.num_hidden_layers)

    def _rotary(
        self, positions: torch.Tensor, lengths: torch.Tensor
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor, float]]:
        """Per layer type: cos, sin (B, T, d/2) at `positions` (B, T) (angles in float64), and the softmax scale.
        Length-dependent types take each row's frequencies at its `lengths` (B,)."""
        head_dim = self.config.hidden_size // self.config.num_attention_heads
        tables = {}
        for layer_type in sorted(set(self._layer_types())):
            rope_type = layer_rope(self.config, layer_type)[0].get("rope_type", "default")
            per_row = rope_type in LENGTH_DEPENDENT
            rows = lengths.tolist() if per_row else [int(lengths.max())]
            found = {n: inverse_frequencies(self.config, layer_type, n, positions.device) for n in set(rows)}
            inv_freq = torch.stack([found[n][0] for n in rows]).double()  # (B or 1, d/2)
            angles = positions.double()[:, :, None] * inv_freq[:, None, :]  # (B, T, d/2)
            factor = found[rows[0]][1]
            tables[layer_type] = (angles.cos().float(), angles.sin().float(), factor**2 / math.sqrt(head_dim))
        return tables

    def _embed(self, input_ids, previous_token_ids, previous_valid) -> torch.Tensor:
        """Normed token embeddings (B, T, C), each mixed with its previous token's by the smear gate (where that
        token is real: not padding, not before the start)."""
        eps = self.config.rms_norm_eps
        x = rms_norm(self.embed_tokens(input_ids), eps)
        if self.smear_gate is None or self.smear_lambda is None:
            return x
        first = (
            rms_norm(self.embed_tokens(previous_token_ids), eps)
            if previous_token_ids is not None
            else torch.zeros_like(x[:, :1])
        )
        previous = torch.cat([first, x[:, :-1]], dim=1) * previous_valid[..., None].to(x.dtype)
        gate = self.smear_lambda * torch.sigmoid(self.smear_gate(x[..., :SMEAR_CHANNELS]))  # (B, T, 1)
        return x + gate * previous

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        cache: DynamicCache | None = None,
        past_key_values: DynamicCache | None = None,
        use_cache: bool | None = None,
        previous_token_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        """input_ids (B, T) (the new tokens when a cache holds the earlier ones) -> final-normed hidden states
        (B, T, C); attention_mask (B, past + T), 1 = real token."""
        B, T = input_ids.shape
        cache = cache if cache is not None else past_key_values
        if (
            cache is None
            and (self.config.use_cache if use_cache is None else use_cache)
            and not self.training
        ):
            cache = DynamicCache(config=self.config)
        past = cache.get_seq_length() if cache is not None else 0
        if past and self.smear_gate is not None and previous_token_ids is None:
            raise ValueError(
                "A cached forward of this model needs previous_token_ids (B, 1): the smear gate reads it."
            )
        valid = (
            attention_mask.to(torch.long)
            if attention_mask is not None
            else torch.ones(B, past + T, dtype=torch.long, device=input_ids.device)
        )
        positions = (valid.cumsum(-1) - 1).clamp(min=0)  # (B, past + T): left padding shifts nothing
        padding = (valid == 0).sum(-1)  # (B,)
        lengths = positions[:, -1] + 1
        planned = getattr(cache, PLANNED_LENGTH, None)
        if planned is not None:  # generate: the length one forward over prompt + new tokens would have
            lengths = torch.maximum(lengths, planned - padding)
        tables = self._rotary(positions[:, past:], lengths)
        previous_valid = torch.cat([valid.new_zeros(B, 1), valid], dim=1)[:, past : past + T]
        keys = KeySlots(valid, past, T)
        x = x0 = self._embed(input_ids, previous_token_ids, previous_valid)
        backout = None
        for i, (block, layer_type) in enumerate(zip(self.layers, self._layer_types(), strict=True)):
            if self.resid_lambdas is not None and self.x0_lambdas is not None:
                x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = self.value_embeds[str(i)](input_ids) if str(i) in self.value_embeds else None
            cos, sin, scale = tables[layer_type]
            x = block(x, ve, cos, sin, scale, keys, cache)
            if i == self.config.backout_layer:
                backout = x
        if backout is not None and self.backout_lambda is not None:
            x = x - self.backout_lambda * backout
        cache_out: dict = {CACHE_FIELD: cache}
        return BaseModelOutputWithPast(last_hidden_state=rms_norm(x, self.config.rms_norm_eps), **cache_out)


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
        out = self.model(input_ids, attention_mask, **kwargs)
        cap = self.config.final_logit_softcapping
        logits = cap * torch.tanh(self.lm_head(out.last_hidden_state).float() / cap)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return CausalLMOutputWithPast(loss=loss, logits=logits, **{CACHE_FIELD: getattr(out, CACHE_FIELD)})

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, use_cache=True, **kwargs):
        """The tokens the cache lacks, and the one before them (the smear gate reads it)."""
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        past = cache.get_seq_length() if cache is not None else 0
        return {
            "input_ids": input_ids[:, past:],
            "previous_token_ids": input_ids[:, past - 1 : past] if past else None,
            "attention_mask": attention_mask,
            CACHE_FIELD: cache,
            "use_cache": use_cache,
        }

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        """transformers' cache, told the length this generation plans (length-dependent RoPE is evaluated there)."""
        made = super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        cache = model_kwargs.get("cache", model_kwargs.get("past_key_values"))
        if cache is not None and generation_config.max_length is not None:
            setattr(cache, PLANNED_LENGTH, int(generation_config.max_length))
        return made
