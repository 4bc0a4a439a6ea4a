"""RoPE geometry: which rotary frequencies a length trains, and what the literature says a plan can reach.

Notation as in `rlab.core.rope`: head dim d, frequency pairs i = 0 .. d/2-1, inverse frequency theta_i,
wavelength lambda_i = 2*pi / theta_i (tokens per full turn), original (pretraining) length L0.

- **Critical dimension** (Liu et al. 2024, "Scaling Laws of RoPE-based Extrapolation", arXiv 2310.05209): a
  pair is trained on every phase only if its wavelength fits in the training length, lambda_i <= L. For plain
  rope that is the first ceil((d/2) log_b(L/2pi)) pairs, d_extra = twice that; the model extrapolates to
  about T_extra = the wavelength of the first pair that does not complete a period (2pi b^(d_extra/d)). With
  d = 128, b = 1e5 and L0 = 2048: 33 of 64 pairs, T_extra ~ 2400 tokens.
- **Base lower bound** (Men et al. 2024, "Base of RoPE Bounds Context Length", arXiv 2405.14591): attention
  can favour a similar token over random ones at distance m only while B_m = sum_i cos(m theta_i) >= 0, so a
  context of L needs B_m >= 0 for every m <= L; the smallest base of plain rope that keeps it is their lower
  bound, fitted in their Figure 1 for head dim 128 as b >= 0.0424 L^1.628 (`men_fitted_base`: 1.0e5 for 8K,
  3.1e5 for 16K, 9.5e5 for 32K). That fit is the literature's number and the one checked for plain-rope
  variants at head dim 128. For any other spectrum (pi, yarn, longrope, ...) or head dim, `discrimination_reach`
  evaluates the criterion itself on the actual frequencies: the first distance where B_m turns negative.
  (Scanning bases for the smallest one that holds is not a stable number: B_m is not monotone in the base,
  the set of bases that hold at 32K is scattered from 6e5 to 2e6, so the found "bound" depends on the grid.)

`assess` puts these together for one variant of a plan (a checkpoint's head dim, base, L0 and windows,
the target length) and `Geometry.warnings` says, with the numbers, where the plan is outside what these
results say can work. Pure arithmetic on the frequencies (numpy); torch only through `rlab.core.rope`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rlab.core.architecture import full_context_layers, window_sizes
from rlab.core.rope_frequencies import inv_freq_values
from rlab.errors import RlabError
from rlab.nanochat.generations import get_architecture
from rlab.spec.rope import RopeSpec, RopeVariant

if TYPE_CHECKING:
    from rlab.core.gpt_config import GPTConfig
    from rlab.spec.experiment import ExperimentSpec

MEN_FIT_COEFF = 0.0424
MEN_FIT_EXPONENT = 1.628
"""Men et al. 2024, Figure 1: the lower bound of the base against context length L, fitted as 0.0424 * L^1.628
(head dim 128)."""
MEN_FIT_HEAD_DIM = 128
_CHUNK = 4096  # positions per block when summing cosines (bounds the (positions x pairs) matrix)


def wavelengths(inv_freq: Sequence[float]) -> list[float]:
    """lambda_i = 2*pi / theta_i in tokens: how far apart two positions are when pair i has turned once."""
    return [2 * math.pi / f for f in inv_freq]


def critical_pairs(inv_freq: Sequence[float], length: int) -> int:
    """How many pairs complete a full period within `length` tokens (Liu et al.'s critical dimension / 2)."""
    return sum(1 for w in wavelengths(inv_freq) if w <= length)


def extrapolation_bound(inv_freq: Sequence[float], length: int) -> float | None:
    """Liu et al.'s T_extra for frequencies trained at `length`: the shortest wavelength that does not fit in
    it (the first pair never seen through a whole turn); None when every pair turns within `length`."""
    longer = [w for w in wavelengths(inv_freq) if w > length]
    return min(longer) if longer else None


def discrimination_reach(inv_freq: Sequence[float], limit: int) -> int | None:
    """The largest L <= `limit` with B_m = sum_i cos(m theta_i) >= 0 for every m <= L (Men et al.'s
    long-term decay of token discrimination); None when it holds all the way to `limit`."""
    theta = np.asarray(inv_freq, dtype=np.float64)
    for start in range(0, limit + 1, _CHUNK):
        m = np.arange(start, min(limit, start + _CHUNK - 1) + 1, dtype=np.float64)
        negative = np.nonzero(np.cos(np.outer(m, theta)).sum(axis=1) < 0)[0]
        if negative.size:
            return int(m[negative[0]]) - 1
    return None


def plain_inv_freq(base: float, head_dim: int) -> list[float]:
    """theta_i = base^(-2i/d)."""
    return [base ** (-2 * i / head_dim) for i in range(head_dim // 2)]


def men_fitted_base(length: int) -> float:
    """The paper's fit to its bound for head dim 128: 0.0424 * L^1.628 (Figure 1)."""
    return MEN_FIT_COEFF * length**MEN_FIT_EXPONENT


@dataclass(frozen=True)
class Geometry:
    """One variant's rotary geometry in one plan: what pretraining covered, what the variant brings to the target."""

    name: str
    variant: str
    head_dim: int
    base: float
    original_len: int
    target_len: int
    pairs: int
    critical_l0: int
    """Pairs of plain rope (the checkpoint's base) that complete a period within L0."""
    t_extra_l0: float | None
    """Liu et al.'s extrapolation bound of the base as pretrained (None: every pair turned within L0)."""
    critical_target: int
    """Pairs of the variant's frequencies (at the target) that complete a period within the target length."""
    t_extra_target: float | None
    """The same bound for the variant's frequencies trained at the target length."""
    effective_base: float | None
    """The base the variant's frequencies are plain rope at (rope, ntk, abf, dynamic-ntk at the target); None
    for variants that reshape the spectrum (pi, yarn, llama3, ntk-by-parts, longrope)."""
    base_bound: float | None
    """Men et al.'s fitted lower bound on the base for the target length (head dim 128 only, else None)."""
    reach: int | None
    """How far the variant's frequencies keep B_m >= 0 (`discrimination_reach`, checked up to the target)."""
    short_windows: tuple[int, int] | None = None
    """nanochat-2026: the short window at L0 and the one the plan trains at (None without windows)."""
    window_len: int | None = None
    """The length the plan's windows are sized for (the continued training length under `windows: scale`)."""
    windows_rule: str | None = None
    layers: str = "all"
    notes: list[str] = field(default_factory=list)

    @property
    def critical_dim_l0(self) -> int:
        """Liu et al.'s d_extra (dimensions, two per pair)."""
        return 2 * self.critical_l0

    def warnings(self) -> list[str]:
        """Where the plan is outside what the literature says can work, one line each, with the numbers."""
        lines = []
        d, target = self.head_dim, self.target_len
        if self.effective_base is not None and self.base_bound is not None:
            if self.effective_base < self.base_bound:
                lines.append(
                    f"{self.name}: rotary base {self.effective_base:.3g} is below {self.base_bound:.1e}, Men et al. "
                    f"2024's lower bound for {target} tokens at head dim 128 (their fit 0.0424 L^1.628): below it "
                    f"attention cannot favour similar tokens over random ones across the whole context (here "
                    f"B_m = sum cos(m theta_i) turns negative at m = {_first_negative(self.reach)})."
                )
        elif self.reach is not None:
            kind = (
                f"rotary base {self.effective_base:.3g}"
                if self.effective_base is not None
                else "its frequencies"
            )
            lines.append(
                f"{self.name}: {kind} keep Men et al. 2024's token discrimination (B_m = sum cos(m theta_i) >= 0) "
                f"only up to m = {self.reach}, short of the {target}-token target at head dim {d}."
            )
        if self.short_windows is not None and self.windows_rule == "scale":
            before, after = self.short_windows
            if after > before:
                lines.append(
                    f"{self.name}: nanochat-2026's short windows follow sequence_len: training at {self.window_len} "
                    f"grows them from {before} to {after} tokens (x{after / before:g}), so the short-window layers "
                    f"attend at distances they never trained at; `windows: fixed` keeps them at {before}."
                )
        return lines

    def summary(self) -> list[str]:
        """Human lines for `rlab rope inspect` (and the warnings' context)."""
        d, n = self.head_dim, self.pairs
        lines = [
            f"critical dimension (Liu et al. 2024): {self.critical_l0} of {n} pairs of base {self.base:g} turn "
            f"a full period within L0 = {self.original_len} (d_extra = {self.critical_dim_l0}); plain rope "
            f"extrapolates to about {_tokens(self.t_extra_l0)} tokens",
            f"{self.variant} at the target {self.target_len}: {self.critical_target} of {n} pairs turn a full "
            f"period within it; trained there it extrapolates to about {_tokens(self.t_extra_target)} tokens",
            (
                f"base lower bound for {self.target_len} tokens (Men et al. 2024, fit 0.0424 L^1.628 for head dim "
                f"128): {self.base_bound:.2e}"
                if self.base_bound is not None
                else f"base lower bound (Men et al. 2024): fitted for head dim 128 only, not {d}"
            )
            + (
                f"; this variant is plain rope at base {self.effective_base:.3g}"
                if self.effective_base is not None
                else ""
            )
            + f"; its B_m >= 0 up to m = {_reach_text(self.reach, self.target_len)}",
        ]
        if self.short_windows is not None:
            before, after = self.short_windows
            lines.append(
                f"short windows: {before} tokens at L0, {after} at the target (windows: {self.windows_rule}, "
                f"layers: {self.layers})"
            )
        return lines + self.notes

    def as_json(self) -> dict[str, object]:
        return {
            "head_dim": self.head_dim,
            "base": self.base,
            "original_len": self.original_len,
            "target_len": self.target_len,
            "pairs": self.pairs,
            "critical_pairs_l0": self.critical_l0,
            "critical_dim_l0": self.critical_dim_l0,
            "t_extra_l0": self.t_extra_l0,
            "critical_pairs_target": self.critical_target,
            "t_extra_target": self.t_extra_target,
            "effective_base": self.effective_base,
            "base_lower_bound": self.base_bound,
            "discrimination_reach": self.reach,
            "short_windows": list(self.short_windows) if self.short_windows else None,
            "warnings": self.warnings(),
        }


def _tokens(value: float | None) -> str:
    return "any length (every pair turned)" if value is None else f"{value:,.0f}"


def _first_negative(reach: int | None) -> str:
    return "no m up to the target" if reach is None else str(reach + 1)


def _reach_text(reach: int | None, target: int) -> str:
    return f"the target ({target}) and beyond" if reach is None else str(reach)


def effective_base(spec: RopeSpec, head_dim: int, target_len: int) -> float | None:
    """The base whose plain frequencies the variant's are at `target_len`, for the variants that only move it."""

    if spec.variant in (RopeVariant.rope, RopeVariant.abf, RopeVariant.ntk, RopeVariant.dynamic_ntk):
        freqs = inv_freq_values(spec, head_dim, target_len)
        return float(freqs[1] ** (-head_dim / 2)) if head_dim > 2 else None  # theta_1 = b^(-2/d)
    return None


def assess(
    spec: RopeSpec,
    head_dim: int,
    target_len: int,
    *,
    name: str | None = None,
    short_windows: tuple[int, int] | None = None,
    window_len: int | None = None,
) -> Geometry:
    """The geometry of `spec` (base and L0 filled in) extended to `target_len`; `short_windows` = the short
    window at L0 and at the plan's length on a windowed model."""

    assert spec.base is not None and spec.original_len is not None, (
        "fill base and L0 from the checkpoint first"
    )
    l0 = spec.original_len
    plain = plain_inv_freq(spec.base, head_dim)
    scaled = inv_freq_values(spec, head_dim, target_len)
    return Geometry(
        name=name or spec.variant.value,
        variant=spec.variant.value,
        head_dim=head_dim,
        base=spec.base,
        original_len=l0,
        target_len=target_len,
        pairs=head_dim // 2,
        critical_l0=critical_pairs(plain, l0),
        t_extra_l0=extrapolation_bound(plain, l0),
        critical_target=critical_pairs(scaled, target_len),
        t_extra_target=extrapolation_bound(scaled, target_len),
        effective_base=effective_base(spec, head_dim, target_len),
        base_bound=men_fitted_base(target_len) if head_dim == MEN_FIT_HEAD_DIM else None,
        reach=discrimination_reach(scaled, target_len),
        short_windows=short_windows,
        window_len=window_len,
        windows_rule=spec.windows if short_windows is not None else None,
        layers=spec.layers,
    )


def plan_warnings(geometries: Sequence[Geometry]) -> list[str]:
    """Every variant's warnings, the ones that read the same for several variants merged into one line."""
    by_text: dict[str, list[str]] = {}
    for geometry in geometries:
        prefix = f"{geometry.name}: "
        for line in geometry.warnings():
            by_text.setdefault(line.removeprefix(prefix), []).append(geometry.name)
    return [f"{', '.join(names)}: {text}" for text, names in by_text.items()]


def assess_plan(
    variants: dict[str, RopeSpec],
    config: GPTConfig,
    target_len: int,
    train_len: int,
) -> list[Geometry]:
    """`assess` for every variant of a plan on a checkpoint (`CheckpointInfo.config`: its head dim, base,
    L0, architecture and window pattern); `train_len` is the length the continued runs train at (it sizes
    nanochat-2026's windows under `windows: scale`)."""

    n_layer, l0 = config.n_layer, config.sequence_len
    arch = get_architecture(config.architecture)
    base = float(config.rotary_base or arch.rotary_base)
    pattern = config.window_pattern or "L"
    geometries = []
    for name, spec in variants.items():
        spec = spec.with_original_len(l0).with_base(base)
        short = None
        if arch.sliding_windows and not all(full_context_layers(pattern, n_layer)):
            context = train_len if spec.windows == "scale" else int(spec.original_len or l0)
            short = (min(window_sizes(pattern, n_layer, l0)), min(window_sizes(pattern, n_layer, context)))
        geometries.append(
            assess(spec, config.head_dim, target_len, name=name, short_windows=short, window_len=train_len)
        )
    return geometries


def plan_geometry_warnings(spec: ExperimentSpec, config: GPTConfig) -> list[str]:
    """The preflight's geometry check of a resolved experiment on its base checkpoint: `plan_warnings` of every
    variant (a RoPE config the model cannot take, e.g. longrope factors for another head dim, is one line)."""
    if spec.target_len is None:
        return []
    try:
        return plan_warnings(assess_plan(spec.variants, config, spec.target_len, spec.train.seq_len))
    except RlabError as exc:
        return [exc.message]
