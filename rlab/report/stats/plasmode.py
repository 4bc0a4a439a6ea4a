"""Plasmode nulls: the report's own tests re-run on the experiment's own per-unit differences, made null.

A calibration on textbook nulls says nothing about this experiment's skew and tails. Here every one-seed test
of a family is taken with its centred per-unit contributions (`inference.UnitContributions`, recorded while
the report computed it), units are resampled with replacement (within strata), so the true difference is 0 and
the shape is the experiment's own, and the test is run again; Holm over the family as in the report. The share
of simulated families with any significant verdict is the familywise error the report's rule has on data like
these; a test's false positives and its 95% interval's coverage of 0 are kept too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd

DEFAULT_REPS = 200
"""Simulated experiments per family (Monte Carlo SE of a 5% rate: 1.5 points)."""
DEFAULT_DRAWS = 20_000
"""At most this many sign-flip draws per simulated test, drawn sequentially (`skew_test.SignFlips.sequential_p`)."""
STOP_HITS = 10
"""A simulated test stops drawing once this many reference values reach its statistic."""


@dataclass(frozen=True)
class FamilyError:
    family: str
    size: int
    reps: int
    familywise: float
    """Share of simulated null families with at least one better/worse verdict (nominal: the family's alpha)."""
    per_test: float
    """Share of simulated tests significant at 5% unadjusted (nominal 5%)."""
    coverage: float
    """Share of simulated 95% intervals that cover 0 (nominal 95%)."""

    @property
    def mc_se(self) -> float:
        return math.sqrt(inf.ALPHA * (1 - inf.ALPHA) / max(self.reps, 1))

    def line(self) -> str:
        return (
            f"{self.family} family ({self.size} tests): familywise error {self.familywise:.1%} "
            f"(nominal {inf.ALPHA:.0%} ± {2 * self.mc_se:.1%}), per test {self.per_test:.1%}, "
            f"95% coverage {self.coverage:.1%} over {self.reps} plasmode nulls"
        )


def resample(unit: inf.UnitContributions, rng: np.random.Generator) -> np.ndarray:
    """One null draw: the centred contributions resampled with replacement (within each stratum)."""
    if unit.strata is None:
        return unit.z[rng.integers(0, len(unit.z), len(unit.z))]
    out = np.empty_like(unit.z)
    for label in np.unique(unit.strata):
        where = np.flatnonzero(unit.strata == label)
        out[where] = unit.z[where[rng.integers(0, len(where), len(where))]]
    return out


def family_error(
    name: str,
    units: Sequence[inf.UnitContributions],
    reps: int = DEFAULT_REPS,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> FamilyError:
    """Holm over null copies of the family's tests, `reps` times (independent resamples per test)."""
    rng = inf.rng_for(seed, f"plasmode/{name}")
    any_hit = hits = covered = tests = 0
    for _ in range(reps):
        comps = []
        for unit in units:
            z = resample(unit, rng)
            c = inf.compare(
                z, np.zeros_like(z), strata=unit.strata, rng=rng, draws=draws, stop_hits=STOP_HITS
            )
            comps.append(c)
            if c.p_value is not None:  # the 95% interval excludes 0 exactly when p <= 5% (one procedure)
                tests += 1
                hits += c.p_value <= inf.ALPHA
                covered += c.p_value > inf.ALPHA
        _, _, verdicts = vd.decide_family(name, comps, [False] * len(comps))
        any_hit += any(v.significant for v in verdicts)
    return FamilyError(
        name, len(units), reps, any_hit / max(reps, 1), hits / max(tests, 1), covered / max(tests, 1)
    )


def by_family(
    recorded: Iterable[inf.UnitContributions], frames: Iterable[pd.DataFrame]
) -> dict[str, list[inf.UnitContributions]]:
    """The recorded tests of each family, matched to the report's rows by estimate and unit count (frames with
    `family` (or the copy frames' attrs["family"]), `diff` and an n column; untestable rows never match)."""
    keyed = {(round(u.estimate, 12), u.n_units): u for u in recorded}
    out: dict[str, list[inf.UnitContributions]] = {}
    for frame in frames:
        if frame is None or frame.empty or "diff" not in frame:
            continue
        default = frame.attrs.get("family")
        n_col = "n_units" if "n_units" in frame else "diff_n"
        for row in frame.to_dict("records"):
            p, n, diff = row.get("p_value", math.nan), row.get(n_col), row.get("diff")
            if p is None or pd.isna(p) or n is None or pd.isna(n) or diff is None or pd.isna(diff):
                continue
            unit = keyed.get((round(float(diff), 12), int(n)))
            family = row.get("family") or (default.name if default is not None else None)
            if unit is not None and family:
                out.setdefault(str(family), []).append(unit)
    return out


def calibrate(
    recorded: Iterable[inf.UnitContributions],
    frames: Iterable[pd.DataFrame],
    reps: int = DEFAULT_REPS,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> list[FamilyError]:
    """The plasmode familywise error of every family the report tested with one seed per side."""
    groups = by_family(recorded, frames)
    return [family_error(name, units, reps, draws, seed) for name, units in sorted(groups.items())]
