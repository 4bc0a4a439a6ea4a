"""How a tag's RoPE frequencies are chosen during evaluation, stated in eval.json (and, for dynamic-ntk, chosen).

Every variant but dynamic-ntk has frequencies fixed by its RoPE config. dynamic-ntk's depend on the
length T of the forward pass (Hugging Face's "dynamic" type): base' = b * ((s*T/L0) - (s-1))^(d/(d-2))
for T > L0, plain rope for T <= L0; KV-cache decoding evaluates them at the cache's planned total
length. Its effective NTK scale is therefore s*T/L0 - (s-1): at the continued-training length T = s*L0
that is s^2 - s + 1, not s. Along a BPB-vs-length curve context and frequencies change together.

`eval.dynamic_ntk: fixed` evaluates the frequencies once, at `eval.dynamic_ntk_len` (default the
continued-training length), for every window: exactly static NTK with scale s*Lf/L0 - (s-1), which
is what the model is switched to, so the curve then changes context only.
"""

from __future__ import annotations

from typing import Any

from rlab.spec.eval import EvalSpec
from rlab.spec.rope import RopeSpec, RopeVariant

PER_WINDOW_RULE = (
    "dynamic-ntk, per window (Hugging Face's behaviour): for a forward over T tokens (KV-cache "
    "decoding: the planned total length) base' = b*((s*T/L0)-(s-1))^(d/(d-2)) when T > L0, plain rope "
    "otherwise; effective scale s*T/L0-(s-1), so s^2-s+1 at T = s*L0"
)

LONGROPE_RULE = (
    "longrope: short factors for a forward over T <= L0 tokens, long factors past L0 (Hugging Face's rule; "
    "KV-cache decoding: the planned total length)"
)


def fixed_scale(factor: float, original_len: int, freq_len: int) -> float:
    """Dynamic-ntk's effective scale at one length: s*Lf/L0 - (s-1), at least 1 (plain rope at Lf <= L0)."""
    return max(1.0, factor * max(freq_len, original_len) / original_len - (factor - 1.0))


def apply_eval_rope(model, spec: EvalSpec, target_len: int) -> dict[str, Any]:
    """Switch a dynamic-ntk model to its fixed-scale equivalent when asked; the eval.json `rope_eval` record."""

    rope = model.rope
    if rope.variant == RopeVariant.longrope:
        return {"variant": rope.variant.value, "frequencies": LONGROPE_RULE}
    if rope.variant != RopeVariant.dynamic_ntk:
        return {"variant": rope.variant.value, "frequencies": "fixed by the RoPE config at every length"}
    if spec.dynamic_ntk == "per_window":
        return {
            "variant": rope.variant.value,
            "dynamic_ntk": "per_window",
            "rule": PER_WINDOW_RULE,
            "scale_at_target_len": fixed_scale(rope.factor, rope.original_len, target_len),
        }
    freq_len = int(spec.dynamic_ntk_len or target_len)
    scale = fixed_scale(rope.factor, rope.original_len, freq_len)
    model.set_rope(
        RopeSpec(
            variant="ntk" if scale > 1.0 else "rope",
            base=rope.base,
            factor=scale,
            original_len=rope.original_len,
            layers=rope.layers,
            windows=rope.windows,  # the attention windows stay the ones the model was trained with
        )
    )
    return {
        "variant": rope.variant.value,
        "dynamic_ntk": "fixed",
        "freq_len": freq_len,
        "effective_scale": scale,
        "rule": (
            f"dynamic-ntk's frequencies evaluated once at {freq_len} tokens for every window: static ntk "
            f"with scale s*{freq_len}/L0-(s-1) = {scale:g}"
        ),
    }
