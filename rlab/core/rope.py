"""Rotary position embeddings and their context-extension variants, as a registry.

Every variant is one function `(spec, head_dim, seq_len) -> inv_freq` in `ROPE_VARIANTS`;
adding a variant is one function, one registry line and one test. YaRN and LongRoPE also change the
attention temperature, through `attention_factor(spec)`.

Notation: head dim d, base b, original (pretraining) context L0 = `spec.original_len`,
scale s = `spec.factor`, frequency index i = 0 .. d/2-1, plain inverse frequency
theta_i = b^(-2i/d), wavelength lambda_i = 2*pi / theta_i (tokens per full turn).

- ``rope``: theta_i. The factor is ignored.
- ``pi`` — Position Interpolation (Chen et al. 2023, arXiv 2306.15595): theta_i / s, i.e. every
  position is squeezed by s into the range seen in pretraining.
- ``ntk`` — *static* NTK-aware scaling (bloc97, r/LocalLLaMA, June 2023): the base becomes
  b * s^(d/(d-2)) at every length. Highest frequency unchanged, lowest one divided by s.
- ``dynamic-ntk`` — *dynamic* NTK scaling (emozilla, r/LocalLLaMA, June 2023; the formula of
  Hugging Face's "dynamic" type): for a sequence of length L > L0 the base becomes
  b * ((s*L/L0) - (s-1))^(d/(d-2)); at L <= L0 it is plain rope. Not the same formula as
  ``ntk``: here the effective scale grows with L and equals 1 at L0, whereas ``ntk`` applies s
  everywhere. Which L: a full forward uses its own length T; KV-cache decoding uses the
  cache's planned total length (`KVCache(seq_len=...)`), so that every cached key was rotated
  with the same frequencies a full forward over that length uses and cached decoding equals a
  full forward. Without a planned length the cache uses `pos + T` at each step (frequencies
  then change while decoding, as in Hugging Face's implementation).
- ``yarn`` — YaRN (Peng et al. 2023, arXiv 2309.00071), "NTK-by-parts" interpolation. A
  dimension that turns r_i = L0 / lambda_i times over the original context is left as is when
  r_i > beta_fast, divided by s when r_i < beta_slow, and blended linearly in between (the ramp
  bounds are found in dimension space and rounded outwards, as in the paper's code and in Hugging
  Face's default ``truncate=True``). Attention temperature mscale = 0.1*ln(s) + 1 unless
  `attention_factor` is given; the attention logits are multiplied by mscale^2. Convention:
  the paper folds mscale into cos/sin (so q.k gets mscale^2); in this architecture q and k are
  RMS-normalised *after* the rotation, which would silently erase that, so rlab folds mscale^2
  into the softmax scale instead (`softmax_scale`), which is the same logits.
- ``llama3`` — Llama 3.1's wavelength-based scaling (Meta, "The Llama 3 Herd of Models", arXiv
  2407.21783, and its reference code): wavelengths shorter than L0/high_freq_factor are kept,
  longer than L0/low_freq_factor are divided by s, and in between the two are blended smoothly
  with weight (L0/lambda_i - low_freq_factor) / (high_freq_factor - low_freq_factor).
- ``abf`` — Adjusted Base Frequency (Xiong et al. 2023, "Effective Long-Context Scaling of Foundation
  Models", arXiv 2309.16039, Llama-2-Long: 10000 -> 500000; Qwen3 trains on at 1000000): plain rope at the
  raised base `new_base`, continued-trained. The factor is not used. Hugging Face: `default` with the new
  `rope_theta`.
- ``ntk-by-parts`` — YaRN's per-dimension ramp alone (bloc97's "NTK-by-parts", the interpolation YaRN builds
  on, arXiv 2309.00071 section 3.2): the same frequencies as ``yarn``, attention temperature 1. Hugging Face:
  `yarn` with `attention_factor: 1.0`.
- ``longrope`` — LongRoPE (Ding et al. 2024, arXiv 2402.13753; Phi-3's static factors, LongRoPE2 arXiv
  2502.20082 searches them the same shape): theta_i / short_factor[i] for sequences up to L0, theta_i /
  long_factor[i] past it (Hugging Face's rule: the sequence length, or a KV cache's planned length, decides),
  and attention temperature sqrt(1 + ln(s)/ln(L0)) unless `attention_factor` is given, applied at every
  length as Hugging Face applies it.

Layers (`spec.layers`): on a sliding-window model, `global` applies the variant to the full-context layers
only and leaves the short-window layers plain rope at the checkpoint's base (`RopeSpec.plain`), as Gemma 3
and OLMo 3 scale only their global layers; the model picks each layer's tables (`rlab.core.gpt`).

Rotation convention (nanochat's, so its checkpoints work): the head dim is split into halves
x1 = x[..., :d/2], x2 = x[..., d/2:]; y1 = x1*cos + x2*sin, y2 = -x1*sin + x2*cos. Tables are kept
in fp32 (angles computed in fp64) and cast to the input's dtype at use; the rotation returns
the input's dtype. Tables grow lazily to any length (`RotaryTables`); nothing is sized in advance.
"""

from __future__ import annotations

import torch

from rlab.core.rope_frequencies import (  # the arithmetic; re-exported: the model's callers use it from here
    DEFAULT_BASE,
    FORMULAS,
    LENGTH_DEPENDENT,
    ROPE_VARIANTS,
    attention_factor,
    check_head_dim,
    frequency_length,
    required_original_len,
    softmax_scale,
)
from rlab.spec.rope import RopeSpec

__all__ = [
    "DEFAULT_BASE",
    "FORMULAS",
    "LENGTH_DEPENDENT",
    "ROPE_VARIANTS",
    "RotaryTables",
    "apply_rotary",
    "attention_factor",
    "check_head_dim",
    "frequency_length",
    "inv_freq",
    "required_original_len",
    "rotary_angles",
    "softmax_scale",
]


def inv_freq(spec: RopeSpec, head_dim: int, seq_len: int | None = None) -> torch.Tensor:
    """Inverse frequencies (d/2,) in fp32 for `spec` (`seq_len` matters only for dynamic-ntk)."""
    check_head_dim(head_dim)
    return ROPE_VARIANTS[spec.variant](spec, head_dim, seq_len, torch).to(torch.float32)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (i, i + d/2) of the last dim. x (B, T, H, d); cos, sin broadcastable to (B, T, H, d/2).

    cos/sin are cast to x's dtype, so the result has x's dtype (bf16 in, bf16 out).
    """
    assert x.ndim == 4 and x.shape[-1] % 2 == 0, f"expected (B, T, H, even d), got {tuple(x.shape)}"
    half = x.shape[-1] // 2
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]  # (B, T, H, d/2) each
    y1 = x1 * cos + x2 * sin
    y2 = x2 * cos - x1 * sin
    return torch.cat([y1, y2], dim=-1)  # (B, T, H, d)


def rotary_angles(freqs: torch.Tensor, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of position*freq for positions [start, stop): each (stop-start, d/2) fp32.

    Angles are formed in fp64 so that long positions (e.g. 10^5) keep their precision.
    """
    positions = torch.arange(start, stop, dtype=torch.float64)  # (T,)
    angles = torch.outer(positions, freqs.to(torch.float64))  # (T, d/2)
    return angles.cos().to(torch.float32), angles.sin().to(torch.float32)


class RotaryTables:
    """Lazily grown cos/sin tables for one RoPE spec and head dim, per device and frequency length.

    `get(start, length, device, freq_len)` returns cos, sin of shape (1, length, 1, d/2), fp32,
    for positions start .. start+length-1. Capacity doubles when a longer position is asked for,
    so there is no maximum length. `freq_len` is the sequence length the frequencies are
    evaluated at (only length-dependent variants use it; others share one table).
    """

    def __init__(self, spec: RopeSpec, head_dim: int) -> None:
        check_head_dim(head_dim)
        self.spec = spec
        self.head_dim = head_dim
        self.length_dependent = spec.variant in LENGTH_DEPENDENT
        self._tables: dict[tuple[str, int | None], tuple[torch.Tensor, torch.Tensor]] = {}

    def get(
        self, start: int, length: int, device: torch.device | str, freq_len: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        key_len = frequency_length(self.spec, freq_len)  # lengths with the same frequencies share a table
        key = (str(torch.device(device)), key_len)
        stop = start + length
        table = self._tables.get(key)
        if table is None or table[0].shape[1] < stop:
            capacity = max(stop, 2 * table[0].shape[1] if table is not None else 0, 256)
            if self.length_dependent and len(self._tables) > 8:
                self._tables.clear()  # a decoding loop without a planned length makes a new L each step
            freqs = inv_freq(self.spec, self.head_dim, key_len)
            cos, sin = rotary_angles(freqs, 0, capacity)  # (capacity, d/2)
            table = (cos.to(device)[None, :, None, :], sin.to(device)[None, :, None, :])
            self._tables[key] = table
        cos, sin = table
        return cos[:, start:stop], sin[:, start:stop]  # (1, length, 1, d/2) each
