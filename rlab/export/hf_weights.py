"""nanochat's state-dict keys -> the exported model's (transformers' NanoChat names, plus the 2026 parts).

One table per concern, as torchtitan keeps a model's foreign-format mapping beside it: block matrices by their
role, the 2026 scalars and embeddings by name. The vocabulary padding (nanochat pads wte and lm_head to a
multiple of 64) is cut off: padded rows are never looked up and their logits are sliced away by rlab, so the
exported model has exactly the tokenizer's vocabulary and gives the same logits over it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rlab.errors import ExportError

if TYPE_CHECKING:
    import torch

BLOCK_KEYS = {
    "attn.c_q.weight": "self_attn.q_proj.weight",
    "attn.c_k.weight": "self_attn.k_proj.weight",
    "attn.c_v.weight": "self_attn.v_proj.weight",
    "attn.c_proj.weight": "self_attn.o_proj.weight",
    "attn.ve_gate.weight": "self_attn.ve_gate.weight",
    "mlp.c_fc.weight": "mlp.fc1.weight",
    "mlp.c_proj.weight": "mlp.fc2.weight",
}
MODEL_KEYS = {
    "transformer.wte.weight": "model.embed_tokens.weight",
    "lm_head.weight": "lm_head.weight",
    "resid_lambdas": "model.resid_lambdas",
    "x0_lambdas": "model.x0_lambdas",
    "smear_gate.weight": "model.smear_gate.weight",
    "smear_lambda": "model.smear_lambda",
    "backout_lambda": "model.backout_lambda",
}
VOCAB_ROWS = re.compile(r"^(transformer\.wte|lm_head|value_embeds\.\d+)\.weight$")
_BLOCK = re.compile(r"^transformer\.h\.(\d+)\.(.+)$")
_VALUE_EMBED = re.compile(r"^value_embeds\.(\d+)\.weight$")


def hf_key(key: str) -> str:
    """The exported name of one nanochat state-dict key; `ExportError` for a key no table knows."""
    if key in MODEL_KEYS:
        return MODEL_KEYS[key]
    if block := _BLOCK.match(key):
        layer, rest = block.groups()
        if rest in BLOCK_KEYS:
            return f"model.layers.{layer}.{BLOCK_KEYS[rest]}"
    if ve := _VALUE_EMBED.match(key):
        return f"model.value_embeds.{ve.group(1)}.weight"
    raise ExportError(f"No exported name for checkpoint key {key!r}: rlab.export.hf_weights does not map it.")


def hf_state_dict(state: dict[str, torch.Tensor], vocab_size: int) -> dict[str, torch.Tensor]:
    """The exported state dict: renamed, vocabulary rows cut to `vocab_size`, float32, contiguous."""
    import torch

    out = {}
    for key, tensor in state.items():
        value = tensor.detach().to(torch.float32)
        if VOCAB_ROWS.match(key):
            value = value[:vocab_size]
        out[hf_key(key)] = value.contiguous().clone()
    return out
