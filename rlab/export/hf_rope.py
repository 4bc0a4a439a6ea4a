"""An arm's RoPE in Hugging Face transformers' own vocabulary (`rope_parameters`, always with `rope_theta`).

transformers 5 registers `default` (built into each model), `linear`, `dynamic`, `yarn`, `longrope`, `llama3`
and `proportional` (`modeling_rope_utils.ROPE_INIT_FUNCTIONS`). Static NTK is no longer registered: it is plain
rope at a changed base, so it exports as `default` with `rope_theta` = b * s^(d/(d-2)), and abf as `default` at
its new base. ntk-by-parts is `yarn` with `attention_factor: 1.0`. `rope_theta` is written for every variant:
a library that drops it falls back to 10000, which silently breaks any other base (a fine-tuning library that
lost it sent Llama-3.1-8B's perplexity at 7.8K positions from 13.8 to 11,316).

A variant transformers cannot express gets an `ExportError` saying why. `layers: global` becomes per-layer-type
parameters (`full_attention` scaled, `sliding_attention` plain), as Gemma 3 writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlab.core.rope import attention_factor
from rlab.errors import ExportError
from rlab.spec.rope import RopeSpec, RopeVariant

RopeParameters = dict[str, Any]


def _scaled(rope_type: str, spec: RopeSpec, **more: Any) -> RopeParameters:
    """A scaled rope type's parameters: its factor over the original length L0, then its own."""
    return {
        "rope_type": rope_type,
        "rope_theta": spec.base,
        "factor": spec.factor,
        "original_max_position_embeddings": spec.original_len,
        **more,
    }


def _rope(spec: RopeSpec, head_dim: int) -> RopeParameters:
    return {"rope_type": "default", "rope_theta": spec.base}


def _pi(spec: RopeSpec, head_dim: int) -> RopeParameters:
    return {"rope_type": "linear", "rope_theta": spec.base, "factor": spec.factor}


def _ntk(spec: RopeSpec, head_dim: int) -> RopeParameters:
    assert spec.base is not None
    return {"rope_type": "default", "rope_theta": spec.base * spec.factor ** (head_dim / (head_dim - 2))}


def _dynamic_ntk(spec: RopeSpec, head_dim: int) -> RopeParameters:
    # L0 where every other scaled type keeps it; transformers' own `dynamic` would read max_position_embeddings
    # (the served length) instead, so these exports always ship their modeling file (`hf.needs_remote_code`)
    return _scaled("dynamic", spec)


def _yarn(spec: RopeSpec, head_dim: int) -> RopeParameters:
    params = _scaled("yarn", spec, beta_fast=spec.beta_fast, beta_slow=spec.beta_slow)
    if spec.variant is RopeVariant.ntk_by_parts:
        params["attention_factor"] = 1.0
    elif spec.attention_factor is not None:
        params["attention_factor"] = float(spec.attention_factor)
    return params


def _llama3(spec: RopeSpec, head_dim: int) -> RopeParameters:
    return _scaled(
        "llama3", spec, low_freq_factor=spec.low_freq_factor, high_freq_factor=spec.high_freq_factor
    )


def _abf(spec: RopeSpec, head_dim: int) -> RopeParameters:
    return {"rope_type": "default", "rope_theta": spec.new_base}


def _longrope(spec: RopeSpec, head_dim: int) -> RopeParameters:

    if len(spec.short_factor or []) != head_dim // 2:
        raise ExportError(
            f"longrope has {len(spec.short_factor or [])} factors but this model's head dim {head_dim} needs "
            f"{head_dim // 2}: transformers would reject the config."
        )
    return _scaled(
        "longrope",
        spec,
        short_factor=list(spec.short_factor or []),
        long_factor=list(spec.long_factor or []),
        attention_factor=attention_factor(spec),
    )


HF_ROPE: dict[RopeVariant, Callable[[RopeSpec, int], RopeParameters]] = {
    RopeVariant.rope: _rope,
    RopeVariant.pi: _pi,
    RopeVariant.ntk: _ntk,
    RopeVariant.dynamic_ntk: _dynamic_ntk,
    RopeVariant.yarn: _yarn,
    RopeVariant.llama3: _llama3,
    RopeVariant.abf: _abf,
    RopeVariant.ntk_by_parts: _yarn,
    RopeVariant.longrope: _longrope,
}
"""rlab variant -> its transformers `rope_parameters`. A variant missing here cannot be exported."""


def hf_rope_parameters(spec: RopeSpec, head_dim: int) -> RopeParameters:
    """`rope_parameters` for one (filled-in: base and L0 set) RopeSpec; `ExportError` when transformers has none."""
    if spec.base is None or spec.original_len is None:
        raise ExportError(
            f"{spec.describe()}: base and original_len must be filled from the checkpoint first."
        )
    to_hf = HF_ROPE.get(spec.variant)
    if to_hf is None:
        raise ExportError(
            f"RoPE variant '{spec.variant.value}' has no counterpart in transformers' rope types "
            "(default, linear, dynamic, yarn, longrope, llama3): a loader would compute other frequencies.",
            "Export an arm of a variant transformers implements, or add its mapping to rlab.export.hf_rope.",
        )
    params = to_hf(spec, head_dim)
    params["rope_theta"] = float(params["rope_theta"])
    return params


def hf_layer_rope(spec: RopeSpec, head_dim: int, layer_types: list[str]) -> RopeParameters:
    """The config's `rope_parameters`: flat, or per layer type when `layers: global` leaves short-window layers plain."""
    scaled = hf_rope_parameters(spec, head_dim)
    if spec.layers == "all" or "sliding_attention" not in layer_types:
        return scaled
    return {"full_attention": scaled, "sliding_attention": hf_rope_parameters(spec.plain(), head_dim)}
