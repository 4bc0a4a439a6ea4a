"""RoPE variant configuration: which frequency scaling a model uses, and its parameters.

The formulas live in `rlab.core.rope`; this module only names and validates them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from rlab.errors import SpecError
from rlab.spec.base import StrictModel
from rlab.variants import EXTENSION_VARIANTS, VARIANT_NAMES, RopeVariant, parse_variant

__all__ = ["EXTENSION_VARIANTS", "VARIANT_NAMES", "RopeSpec", "RopeVariant", "parse_variant"]


class RopeSpec(StrictModel):
    """One RoPE configuration. Defaults reproduce nanochat's plain rotary embeddings."""

    variant: RopeVariant = RopeVariant.rope
    """Which scaling: rope (none), pi, ntk (static NTK-aware), dynamic-ntk, yarn, llama3."""
    base: float | None = Field(None, gt=0)
    """Rotary base (theta); null = the checkpoint's (nanochat-2025: 10000, nanochat-2026: 100000)."""
    factor: float = 1.0
    """Scale factor s: target context / original context. Must be >= 1 for extension variants."""
    original_len: int | None = Field(None, gt=0)
    """Original (pretraining) context length L0; null = the checkpoint's sequence_len."""
    beta_fast: float = Field(32.0, gt=0)
    """YaRN: rotations per original context above which a dimension is left unscaled."""
    beta_slow: float = Field(1.0, gt=0)
    """YaRN: rotations per original context below which a dimension is fully interpolated."""
    attention_factor: float | None = Field(None, gt=0)
    """YaRN: attention temperature mscale; null = 0.1*ln(s)+1. Logits are scaled by its square."""
    low_freq_factor: float = Field(1.0, gt=0)
    """llama3: wavelengths longer than L0/low_freq_factor are fully interpolated."""
    high_freq_factor: float = Field(4.0, gt=0)
    """llama3: wavelengths shorter than L0/high_freq_factor are left unscaled."""
    windows: Literal["scale", "fixed"] = "scale"
    """Sliding-window layers (nanochat-2026) when the context is extended: `scale` = windows follow the
    model's sequence_len (nanochat's rule S = ceil(len/4/128)*128, L = len, what nanochat itself computes
    for the continued checkpoint); `fixed` = the sizes in tokens the checkpoint was trained with (from
    original_len). No effect on architectures without windows."""

    @field_validator("variant", mode="before")
    @classmethod
    def _known_variant(cls, value: object) -> object:
        if isinstance(value, str) and not isinstance(value, RopeVariant):
            return parse_variant(value)
        return value

    @model_validator(mode="after")
    def _check(self) -> RopeSpec:
        if self.factor <= 0:
            raise ValueError(f"factor: must be > 0 (got {self.factor})")
        if self.variant.value in EXTENSION_VARIANTS and self.factor < 1:
            raise ValueError(f"factor: must be >= 1 for variant '{self.variant.value}' (got {self.factor})")
        if self.beta_fast <= self.beta_slow:
            raise ValueError(f"beta_fast: must be > beta_slow (got {self.beta_fast} <= {self.beta_slow})")
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"high_freq_factor: must be > low_freq_factor (got {self.high_freq_factor} <= {self.low_freq_factor})"
            )
        return self

    def with_original_len(self, original_len: int) -> RopeSpec:
        """This spec with L0 filled in (when the user left it to the checkpoint)."""
        return (
            self if self.original_len is not None else self.model_copy(update={"original_len": original_len})
        )

    def with_base(self, base: float) -> RopeSpec:
        """This spec with the rotary base filled in (when the user left it to the checkpoint)."""
        return self if self.base is not None else self.model_copy(update={"base": base})

    def describe(self) -> str:
        """Short human label, e.g. ``yarn(s=4, L0=2048, beta=32/1)``."""
        v = self.variant.value
        if v == "rope":
            return f"rope(base={self.base:g})" if self.base else "rope(base=ckpt)"
        parts = [f"s={self.factor:g}", f"L0={self.original_len or 'ckpt'}"]
        if v == "yarn":
            parts.append(f"beta={self.beta_fast:g}/{self.beta_slow:g}")
        if v == "llama3":
            parts.append(f"lf/hf={self.low_freq_factor:g}/{self.high_freq_factor:g}")
        if self.base is not None:
            parts.append(f"base={self.base:g}")
        return f"{v}({', '.join(parts)})"


def build_rope_spec(**fields: Any) -> RopeSpec:
    """`RopeSpec(**fields)`, with a validation failure turned into one `SpecError` line naming the field.

    For callers outside YAML loading (the CLI's flags): "factor: must be > 0 (got -1.0)".
    """
    try:
        return RopeSpec(**fields)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            msg = str(error["msg"]).removeprefix("Value error, ")
            loc = ".".join(str(part) for part in error["loc"])
            if loc and not msg.startswith(f"{loc}:"):  # a pydantic built-in check: add the offending value
                msg = f"{loc}: {msg} (got {error.get('input')!r})"
            lines.append(msg)
        raise SpecError("; ".join(lines)) from None


def default_variant_specs(factor: float = 4.0) -> dict[str, RopeSpec]:
    """The built-in variant set, so `--variants pi,ntk,yarn` needs no YAML."""
    return {
        name: RopeSpec(variant=RopeVariant(name), factor=1.0 if name == "rope" else factor)
        for name in VARIANT_NAMES
    }
