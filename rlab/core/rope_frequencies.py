"""RoPE variants' inverse frequencies and attention temperatures: the arithmetic, without torch.

Each variant is one function of (spec, head_dim, seq_len, xp) over an array module `xp`: `rlab.core.rope`
runs them on torch for the model (`inv_freq`), and `inv_freq_values` on numpy for what only reads the
numbers (`rlab rope inspect`, the preflight's geometry warnings), which then start without importing torch.
The variants themselves are described in `rlab.core.rope`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rlab.errors import SpecError
from rlab.spec.rope import RopeSpec, RopeVariant

InvFreqFn = Callable[[RopeSpec, int, "int | None", Any], Any]
"""(spec, head_dim, seq_len, xp) -> inv_freq (fp64, (d/2,)) as an array of `xp` (numpy or torch)."""


def check_head_dim(head_dim: int) -> None:
    """The rotation pairs dimension i with i + d/2, so d must be even and positive."""
    if head_dim <= 0 or head_dim % 2:
        raise SpecError(
            f"head_dim: must be a positive even number (got {head_dim})",
            "RoPE rotates pairs of dimensions; choose n_embd / n_head even.",
        )


def required_original_len(spec: RopeSpec) -> int:
    if spec.original_len is None:
        raise SpecError(
            f"original_len: required for variant '{spec.variant.value}' (got null)",
            "Set rope.original_len (or --original-len), or build the model from a checkpoint that fills it in.",
        )
    return spec.original_len


def _exponents(head_dim: int, xp: Any) -> Any:
    """2i/d for i = 0 .. d/2-1, in fp64. (d/2,)"""
    return xp.arange(0, head_dim, 2, dtype=xp.float64) / head_dim


DEFAULT_BASE = 10000.0
"""The base of a spec left to the checkpoint when no model filled it in (the rope CLI, bare specs):
nanochat-2025's. `GPT` always fills it from the checkpoint's architecture first."""


def _base(spec: RopeSpec) -> float:
    return spec.base if spec.base is not None else DEFAULT_BASE


def _plain(base: float, head_dim: int, xp: Any) -> Any:
    """theta_i = base^(-2i/d) in fp64. (d/2,)"""
    return base ** (-_exponents(head_dim, xp))


# --- one function per variant: (spec, head_dim, seq_len) -> inv_freq (fp64, (d/2,)) ---


def _rope(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    return _plain(_base(spec), head_dim, xp)


def _pi(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    return _plain(_base(spec), head_dim, xp) / spec.factor


def _ntk(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    base = _base(spec) * spec.factor ** (head_dim / (head_dim - 2))
    return _plain(base, head_dim, xp)


def _dynamic_ntk(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    original_len = required_original_len(spec)
    length = original_len if seq_len is None else max(seq_len, original_len)
    s = spec.factor
    base = _base(spec) * ((s * length / original_len) - (s - 1)) ** (head_dim / (head_dim - 2))
    return _plain(base, head_dim, xp)


def _ntk_by_parts(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    """YaRN's frequencies (its attention temperature is `attention_factor`'s business)."""
    original_len = required_original_len(spec)
    base, s = _base(spec), spec.factor

    def dim_for_rotations(rotations: float) -> float:
        # Solve L0 / lambda_i = rotations for the (fractional) dimension index 2i.
        return head_dim * math.log(original_len / (rotations * 2 * math.pi)) / (2 * math.log(base))

    # beta_fast turns -> lower dimension bound (left alone below it); beta_slow -> upper bound.
    low = max(math.floor(dim_for_rotations(spec.beta_fast)), 0)
    high: float = min(math.ceil(dim_for_rotations(spec.beta_slow)), head_dim - 1)
    if high == low:
        high += 0.001  # a zero-width ramp would divide by zero; make it a step
    half = head_dim // 2
    # ramp = 0 -> keep theta_i (extrapolate), ramp = 1 -> theta_i / s (interpolate)
    ramp = ((xp.arange(half, dtype=xp.float64) - low) / (high - low)).clip(0.0, 1.0)  # (d/2,)
    theta = _plain(base, head_dim, xp)
    return theta * (1 - ramp) + (theta / s) * ramp


def _llama3(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    original_len = required_original_len(spec)
    s, lo, hi = spec.factor, spec.low_freq_factor, spec.high_freq_factor
    theta = _plain(_base(spec), head_dim, xp)
    wavelen = 2 * math.pi / theta
    long_wave = wavelen > original_len / lo  # low frequencies: fully interpolated
    short_wave = wavelen < original_len / hi  # high frequencies: untouched
    smooth = (original_len / wavelen - lo) / (hi - lo)  # 0 at the long end, 1 at the short end
    blended = (1 - smooth) * theta / s + smooth * theta
    return xp.where(long_wave, theta / s, xp.where(short_wave, theta, blended))


def _abf(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    assert spec.new_base is not None  # RopeSpec requires it for abf
    return _plain(spec.new_base, head_dim, xp)


def _longrope(spec: RopeSpec, head_dim: int, seq_len: int | None, xp: Any) -> Any:
    original_len = required_original_len(spec)
    long = seq_len is not None and seq_len > original_len
    factors = spec.long_factor if long else spec.short_factor
    assert factors is not None  # RopeSpec requires both for longrope
    if len(factors) != head_dim // 2:
        raise SpecError(
            f"{'long' if long else 'short'}_factor: needs head_dim / 2 = {head_dim // 2} numbers, one per "
            f"frequency (got {len(factors)})",
            "LongRoPE factors are searched for one head dim; use factors made for this model's.",
        )
    return _plain(_base(spec), head_dim, xp) / xp.asarray(factors, dtype=xp.float64)


ROPE_VARIANTS: dict[RopeVariant, InvFreqFn] = {
    RopeVariant.rope: _rope,
    RopeVariant.pi: _pi,
    RopeVariant.ntk: _ntk,
    RopeVariant.dynamic_ntk: _dynamic_ntk,
    RopeVariant.yarn: _ntk_by_parts,  # the same frequencies; yarn adds the temperature
    RopeVariant.llama3: _llama3,
    RopeVariant.abf: _abf,
    RopeVariant.ntk_by_parts: _ntk_by_parts,
    RopeVariant.longrope: _longrope,
}

# Variants whose frequencies depend on the sequence length being processed.
LENGTH_DEPENDENT = frozenset({RopeVariant.dynamic_ntk, RopeVariant.longrope})


def frequency_length(spec: RopeSpec, seq_len: int | None) -> int | None:
    """The one length that stands for `seq_len` in a length-dependent variant's frequencies (None for the
    others): every L <= L0 gives the same frequencies, and longrope has only two sets (up to L0, past it)."""
    if spec.variant not in LENGTH_DEPENDENT:
        return None
    if seq_len is None or spec.original_len is None:
        return seq_len
    if spec.variant is RopeVariant.longrope:
        return spec.original_len + 1 if seq_len > spec.original_len else spec.original_len
    return max(seq_len, spec.original_len)


FORMULAS: dict[RopeVariant, str] = {
    RopeVariant.rope: "inv_freq_i = b^(-2i/d)",
    RopeVariant.pi: "inv_freq_i = b^(-2i/d) / s",
    RopeVariant.ntk: "base' = b * s^(d/(d-2)) at every length",
    RopeVariant.dynamic_ntk: "base' = b * ((s*L/L0) - (s-1))^(d/(d-2)) for L > L0, plain rope at L <= L0",
    RopeVariant.yarn: "NTK-by-parts ramp over [beta_slow, beta_fast] rotations per L0; logits * mscale^2",
    RopeVariant.llama3: "wavelength-based blend between b^(-2i/d) and b^(-2i/d)/s over [L0/hf, L0/lf]",
    RopeVariant.abf: "inv_freq_i = b'^(-2i/d) with the raised base b' = new_base, continued-trained",
    RopeVariant.ntk_by_parts: "YaRN's NTK-by-parts ramp over [beta_slow, beta_fast] rotations per L0; no temperature",
    RopeVariant.longrope: "inv_freq_i = b^(-2i/d) / short_factor_i for L <= L0, / long_factor_i past L0; "
    "logits * (sqrt(1+ln s/ln L0))^2",
}
"""One-line formula per variant, recorded next to results so "ntk" is never ambiguous."""


def attention_factor(spec: RopeSpec) -> float:
    """The attention temperature mscale; the logits are multiplied by its square (1 except YaRN and LongRoPE)."""
    if spec.variant not in (RopeVariant.yarn, RopeVariant.longrope):
        return 1.0
    if spec.attention_factor is not None:
        return float(spec.attention_factor)
    if spec.factor <= 1:
        return 1.0
    if spec.variant is RopeVariant.longrope:
        return math.sqrt(1 + math.log(spec.factor) / math.log(required_original_len(spec)))
    return 0.1 * math.log(spec.factor) + 1.0


def softmax_scale(spec: RopeSpec, head_dim: int) -> float:
    """The scale SDPA multiplies q.k by: mscale^2 / sqrt(d) (QK-norm forbids applying mscale earlier)."""
    return attention_factor(spec) ** 2 / math.sqrt(head_dim)


def inv_freq_values(spec: RopeSpec, head_dim: int, seq_len: int | None = None) -> list[float]:
    """`rlab.core.rope.inv_freq`'s values (fp32, as the model keeps them), computed with numpy."""
    import numpy as np

    check_head_dim(head_dim)
    return ROPE_VARIANTS[spec.variant](spec, head_dim, seq_len, np).astype(np.float32).tolist()
