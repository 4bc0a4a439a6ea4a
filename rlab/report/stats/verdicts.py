"""Verdicts and their families: Holm within each declared family, then better / worse / within noise.

A comparison (`rlab.report.stats.inference.Comparison`) becomes a verdict only inside a family whose size counts
its testable comparisons (`holm`, `Family`, `decide_family`); `decide` never says better or worse when the
interval contains 0. `families_note` and `seeds_note` say in words what the verdicts cover.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pandas as pd

from rlab.report.stats.inference import ALPHA, MIN_SEEDS, MIN_UNITS, Comparison


class Verdict(str, Enum):
    """What a comparison concludes. Only the first three are tests; the rest say why there is none."""

    BETTER = "better"
    WORSE = "worse"
    WITHIN_NOISE = "≈ within noise"
    TOO_FEW_UNITS = "too few units"
    UNTESTABLE = "untestable"
    NOT_COMPARABLE = "not comparable"
    NONE = ""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def significant(self) -> bool:
        return self in (Verdict.BETTER, Verdict.WORSE)

    def label(self, n_units: int | None = None) -> str:
        """The text a table shows: ``too few units (n=12)``, ``untestable (no variation)``, or the value."""
        if self is Verdict.TOO_FEW_UNITS and n_units is not None:
            return f"too few units (n={n_units})"
        if self is Verdict.UNTESTABLE:
            return "untestable (no variation)"
        return self.value


@dataclass(frozen=True)
class Family:
    """A declared set of verdicts whose familywise error is controlled together (Holm)."""

    name: str
    """``primary``, ``secondary`` or ``copy``."""
    size: int
    """Testable comparisons in the family (untestable, too-few-units and not-comparable ones never enter)."""
    alpha: float = ALPHA

    def describe(self) -> str:
        return (
            f"{self.name} family: {self.size} comparison{'s' if self.size != 1 else ''}, "
            f"Holm, familywise error {self.alpha:.0%}"
        )

    @property
    def mde_alpha(self) -> float:
        """The level an MDE is quoted at: alpha / m, Holm's strictest step (what the family surely resolves)."""
        return self.alpha / max(1, self.size)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values; None/NaN entries stay None and do not count in the family."""
    valid = [i for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    out: list[float | None] = [None] * len(p_values)
    m, running = len(valid), 0.0
    for rank, i in enumerate(sorted(valid, key=lambda j: p_values[j])):  # type: ignore[arg-type,return-value]
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


def decide(
    c: Comparison | None, p_adjusted: float | None, lower_is_better: bool, alpha: float = ALPHA
) -> Verdict:
    """The verdict of one comparison given its family-adjusted p: better/worse only when significant (and its
    95% interval excludes 0, so a printed verdict never contradicts its interval)."""
    if c is None or math.isnan(c.estimate):
        return Verdict.NONE
    if c.n_units < MIN_UNITS:
        return Verdict.TOO_FEW_UNITS
    if not c.testable or p_adjusted is None or math.isnan(p_adjusted):
        return Verdict.UNTESTABLE
    if not (p_adjusted <= alpha and c.excludes_zero()):
        return Verdict.WITHIN_NOISE
    improved = c.estimate < 0 if lower_is_better else c.estimate > 0
    return Verdict.BETTER if improved else Verdict.WORSE


def decide_family(
    name: str, comparisons: Sequence[Comparison | None], lower_is_better: Sequence[bool], alpha: float = ALPHA
) -> tuple[Family, list[float | None], list[Verdict]]:
    """Holm over the testable comparisons of one family: (the family, adjusted p per entry, verdict per entry)."""
    raw = [c.p_value if c is not None else None for c in comparisons]
    adjusted = holm(raw)
    family = Family(name, sum(p is not None for p in adjusted), alpha)
    verdicts = [decide(c, p, lib, alpha) for c, p, lib in zip(comparisons, adjusted, lower_is_better)]
    return family, adjusted, verdicts


def families_note(families: Sequence[Family]) -> str:
    """What drawing verdicts from several families means for the whole: each keeps its own familywise error,
    so the chance that any of them errs is up to their sum (Bonferroni)."""
    fams = [f for f in families if f.size > 0]
    if len(fams) <= 1:
        return ""
    total = min(1.0, sum(f.alpha for f in fams))
    return (
        f"the verdicts below come from {len(fams)} families ({', '.join(f.name for f in fams)}), each with "
        f"familywise error {fams[0].alpha:.0%}, so the chance that any one of them is a false positive is up to "
        f"{total:.0%}"
    )


def seeds_note(n_seeds: int) -> str:
    """What a verdict on `n_seeds` seeds per arm covers."""
    if n_seeds >= MIN_SEEDS:
        return (
            f"{n_seeds} seeds: training noise covered (seed and unit terms, Satterthwaite's degrees of freedom "
            f"between {n_seeds - 1} and the units')"
        )
    return f"1 seed: training noise not covered (a verdict that covers it needs >= {MIN_SEEDS} seeds per arm)"


SEED_MDE = "seed MDE"
"""How an MDE its seeds set (`Comparison.seed_limited`) is labelled: more seeds, not more units, would shrink it (at 2
seeds a seed variance on 1 df runs such MDEs to hundreds of percent); the line under the Answer says so once."""


def mde_label(seed_limited: bool) -> str:
    return SEED_MDE if seed_limited else "MDE"


def within_noise(mde: float, seed_limited: bool = False, digits: int = 2) -> str:
    """``within noise (MDE 0.22)``; ``within noise (seed MDE 3.10)`` where its seeds set the MDE."""
    if math.isnan(mde):
        return "within noise"
    return f"within noise ({mde_label(seed_limited)} {mde:.{digits}f})"


def row_seed_limited(row: Mapping[str, Any] | pd.Series) -> bool:
    """Whether a comparison row's seeds set its MDE (its ``seed_limited`` column; missing or NaN: no)."""
    flag = row.get("seed_limited")
    return isinstance(flag, bool | np.bool_) and bool(flag)
