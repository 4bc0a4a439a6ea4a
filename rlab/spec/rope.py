"""RoPE variant configuration: which frequency scaling a model uses, and its parameters.

The formulas live in `rlab.core.rope`; this module only names and validates them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from rlab.errors import SpecError
from rlab.spec.base import StrictModel
from rlab.spec.bounds import MAX_FACTOR, InRange, Length, RotaryBase
from rlab.variants import (
    EXTENSION_VARIANTS,
    NEEDS_PARAMETERS,
    VARIANT_NAMES,
    RopeVariant,
    parse_variant,
)

__all__ = [
    "EXTENSION_VARIANTS",
    "NEEDS_PARAMETERS",
    "VARIANT_NAMES",
    "RopeSpec",
    "RopeVariant",
    "parse_variant",
]

LONGROPE_FACTOR_KEYS = ("short_factor", "long_factor")


class RopeSpec(StrictModel):
    """One RoPE configuration. Defaults reproduce nanochat's plain rotary embeddings."""

    variant: RopeVariant = RopeVariant.rope
    """Which scaling: rope (none), pi, ntk (static NTK-aware), dynamic-ntk, yarn, llama3, abf (a raised base),
    ntk-by-parts (YaRN's ramp, no temperature), longrope (per-frequency factors)."""
    base: RotaryBase | None = None
    """Rotary base (theta); null = the checkpoint's (nanochat-2025: 10000, nanochat-2026: 100000)."""
    factor: Annotated[float, InRange(0, MAX_FACTOR)] = 1.0
    """Scale factor s: target context / original context. Must be >= 1 for extension variants."""
    original_len: Length | None = None
    """Original (pretraining) context length L0; null = the checkpoint's sequence_len."""
    beta_fast: float = Field(32.0, gt=0)
    """YaRN: rotations per original context above which a dimension is left unscaled."""
    beta_slow: float = Field(1.0, gt=0)
    """YaRN: rotations per original context below which a dimension is fully interpolated."""
    attention_factor: float | None = Field(None, gt=0)
    """YaRN and longrope: attention temperature; null = 0.1*ln(s)+1 (yarn), sqrt(1+ln(s)/ln(L0)) (longrope).
    Logits are scaled by its square."""
    low_freq_factor: float = Field(1.0, gt=0)
    """llama3: wavelengths longer than L0/low_freq_factor are fully interpolated."""
    high_freq_factor: float = Field(4.0, gt=0)
    """llama3: wavelengths shorter than L0/high_freq_factor are left unscaled."""
    new_base: RotaryBase | None = None
    """abf: the raised rotary base the model continues with (Llama-2-Long: 10000 -> 500000, Qwen3: 1000000);
    `base` stays the checkpoint's. Required for abf, unused by the others."""
    short_factor: Annotated[list[float], Field(max_length=65536)] | None = None
    """longrope: per-frequency divisors up to L0, d/2 numbers (index 0 = the highest frequency); null =
    from factors_file."""
    long_factor: Annotated[list[float], Field(max_length=65536)] | None = None
    """longrope: per-frequency divisors past L0 (the sequence, or a KV cache's planned length), d/2 numbers."""
    factors_file: Path | None = None
    """longrope: a JSON file holding short_factor and long_factor (at top level, or under rope_scaling /
    rope_parameters as in a Phi-3 config.json), relative to the working directory; read once, when the spec
    is validated (the numbers, not the path, travel with the runs)."""
    layers: Literal["all", "global"] = "all"
    """Which layers the variant rescales on a sliding-window architecture (nanochat-2026): all, or global =
    only the full-context (L) layers, the short-window (S) layers keeping plain rope at `base` (Gemma 3 /
    OLMo 3 practice). No effect without windows (every layer is then global)."""
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

    @model_validator(mode="before")
    @classmethod
    def _read_factors_file(cls, data: Any) -> Any:
        """`factors_file` -> short_factor / long_factor (the path is dropped: the numbers are the record)."""
        if not isinstance(data, dict) or data.get("factors_file") is None:
            return data
        if any(data.get(key) is not None for key in LONGROPE_FACTOR_KEYS):
            raise ValueError("factors_file: give the factors inline or as a file, not both")
        short, long = read_longrope_factors(Path(data["factors_file"]))
        rest = {k: v for k, v in data.items() if k != "factors_file"}
        return {**rest, "short_factor": short, "long_factor": long}

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
        self._check_new_variants()
        return self

    def _check_new_variants(self) -> None:
        v = self.variant
        if v is RopeVariant.abf:
            if self.new_base is None:
                raise ValueError(f"new_base: required for variant 'abf' ({NEEDS_PARAMETERS['abf']})")
            if self.base is not None and self.new_base <= self.base:
                raise ValueError(
                    f"new_base: must be above base for abf, which raises it (got {self.new_base:g} <= {self.base:g})"
                )
        elif self.new_base is not None:
            raise ValueError(f"new_base: only variant 'abf' uses it (got it for '{v.value}')")
        factors = [self.short_factor, self.long_factor]
        if v is RopeVariant.longrope:
            if any(f is None for f in factors):
                raise ValueError(
                    f"short_factor: required for variant 'longrope' ({NEEDS_PARAMETERS['longrope']})"
                )
            short, long = factors
            assert short is not None and long is not None
            if len(short) != len(long) or not short:
                raise ValueError(
                    f"long_factor: must have as many numbers as short_factor (got {len(long)} and {len(short)})"
                )
            for key, values in zip(LONGROPE_FACTOR_KEYS, factors, strict=True):
                if any(x <= 0 for x in values or []):
                    raise ValueError(f"{key}: every factor must be > 0 (got {min(values or [0]):g})")
        elif any(f is not None for f in factors):
            raise ValueError(f"short_factor: only variant 'longrope' uses it (got it for '{v.value}')")
        if v is RopeVariant.ntk_by_parts and self.attention_factor is not None:
            raise ValueError(
                "attention_factor: ntk-by-parts has no attention temperature (it is YaRN without one); "
                "use variant 'yarn' to set it"
            )

    def with_original_len(self, original_len: int) -> RopeSpec:
        """This spec with L0 filled in (when the user left it to the checkpoint)."""
        return (
            self if self.original_len is not None else self.model_copy(update={"original_len": original_len})
        )

    def with_base(self, base: float) -> RopeSpec:
        """This spec with the rotary base filled in (when the user left it to the checkpoint).

        abf must raise it: a new_base at or below the checkpoint's is a `SpecError`."""
        if self.base is not None:
            return self
        if self.new_base is not None and self.new_base <= base:
            raise SpecError(
                f"new_base: must be above the checkpoint's rotary base {base:g} for abf (got {self.new_base:g})",
                "ABF raises the base (Llama-2-Long: 10000 -> 500000); choose a larger new_base.",
            )
        return self.model_copy(update={"base": base})

    def scales_layer(self, global_layer: bool) -> bool:
        """Whether this variant applies to a layer (global = full context); else the layer keeps plain rope."""
        return global_layer or self.layers == "all"

    def plain(self) -> RopeSpec:
        """Plain rope at this spec's base and L0: what the layers a `layers: global` variant leaves alone use."""
        return RopeSpec(base=self.base, original_len=self.original_len, windows=self.windows)

    def describe(self) -> str:
        """Short human label, e.g. ``yarn(s=4, L0=2048, beta=32/1)``."""
        v = self.variant.value
        if v == "rope":
            return f"rope(base={self.base:g})" if self.base else "rope(base=ckpt)"
        parts = [f"s={self.factor:g}", f"L0={self.original_len or 'ckpt'}"]
        if v in ("yarn", "ntk-by-parts"):
            parts.append(f"beta={self.beta_fast:g}/{self.beta_slow:g}")
        if v == "llama3":
            parts.append(f"lf/hf={self.low_freq_factor:g}/{self.high_freq_factor:g}")
        if v == "abf":
            parts = [f"new_base={self.new_base:g}", f"L0={self.original_len or 'ckpt'}"]
        if v == "longrope":
            parts.append(f"{len(self.short_factor or [])} factors")
        if self.base is not None:
            parts.append(f"base={self.base:g}")
        if self.layers == "global":
            parts.append("global layers")
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
            if loc and not msg.startswith(
                f"{loc}:"
            ):  # a check without the field's name: add it (and the value)
                msg = f"{loc}: {msg}" + ("" if "(got " in msg else f" (got {error.get('input')!r})")
            lines.append(msg)
        raise SpecError("; ".join(lines)) from None


def default_variant_specs(factor: float = 4.0) -> dict[str, RopeSpec]:
    """The built-in variant set, so `--variants pi,ntk,yarn` needs no YAML (not the variants that need
    parameters of their own, `NEEDS_PARAMETERS`: a spec defines those)."""
    return {
        name: RopeSpec(variant=RopeVariant(name), factor=1.0 if name == "rope" else factor)
        for name in VARIANT_NAMES
        if name not in NEEDS_PARAMETERS
    }


def read_longrope_factors(path: Path) -> tuple[list[float], list[float]]:
    """(short_factor, long_factor) from a JSON file: at top level, or under `rope_scaling` / `rope_parameters`
    (a Hugging Face config.json, e.g. Phi-3's). A `ValueError` naming the file otherwise."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"factors_file: cannot read {path} ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"factors_file: {path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    candidates = [data] + [data.get(k) for k in ("rope_scaling", "rope_parameters") if isinstance(data, dict)]
    for found in candidates:
        if isinstance(found, dict) and all(isinstance(found.get(k), list) for k in LONGROPE_FACTOR_KEYS):
            try:
                short, long = ([float(x) for x in found[k]] for k in LONGROPE_FACTOR_KEYS)
                return short, long
            except (TypeError, ValueError):
                raise ValueError(
                    f"factors_file: {path}: short_factor / long_factor must be numbers"
                ) from None
    raise ValueError(
        f"factors_file: {path} has no short_factor and long_factor lists "
        "(at top level, or under rope_scaling / rope_parameters)"
    )
