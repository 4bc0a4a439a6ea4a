"""Effective context length: the longest evaluated length at which an arm still retrieves, with an interval.

RULER (Hsieh et al. 2024) calls a model's effective length the longest length at which its score stays above a
threshold (85.6, Llama-2-7B's score at 4K); HELMET reports per-length curves. Here, per arm and retrieval source
(passkey scored by likelihood, by generation where any arm retrieves, RULER-style items by likelihood):

* **absolute**: the longest evaluated length L such that accuracy >= `ABSOLUTE` (0.856) at every evaluated length
  up to L;
* **relative**: the same with the threshold `RELATIVE` (90%) of the arm's own accuracy within L0 (the items at
  lengths <= L0 pooled), so an arm that retrieves less well everywhere is judged on what it loses with length.

Censored where the data say no more: ``< shortest`` (fails at the shortest evaluated length, written 0 in
results.csv) and ``>= longest`` (passes everywhere; `censored` says which). The 95% interval on the length is a
percentile bootstrap over items: items (keys) resampled within each length and seed-averaged per item, the
relative threshold recomputed in each draw (`tests/report/calibration_estimands.py` checks its coverage); with
fewer than `inference.MIN_UNITS` items at some length there is no interval. A length where every key is right (or
every one wrong) cannot move under resampling: the interval takes it as passing (failing) where the exact binomial
bound of all-right (all-wrong) clears the threshold, and as either otherwise (`unsettled`). Levels, not tests: no verdict and no
family.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from rlab.report.estimands.arm_row import ArmRow
from rlab.report.estimands.retention import short_length
from rlab.report.sources.arms import Arm
from rlab.report.stats import inference as inf

if TYPE_CHECKING:
    from rlab.report.assemble.measured import Measured

NAME = "effective_length"
ABSOLUTE = 0.856
"""RULER's threshold: Llama-2-7B's average score at 4K."""
RELATIVE = 0.90
"""Share of the arm's own accuracy within L0 an arm must keep at a length."""
HALF_WIDTH = 0.10
"""The 95% half-width on a length's accuracy near `ABSOLUTE` that makes the interval on the length informative."""
BOOTSTRAP = 2000
"""Bootstrap draws of the interval (percentiles at 2.5% and 97.5% of a grid value resolve at this count)."""
SOURCES = {
    "passkey_likelihood": ("passkey_choices", "correct"),
    "passkey_generation": ("passkey_trials", "correct"),
    "ruler_likelihood": ("ruler_choices", "correct"),
}
"""Source name -> (its CSV in TagSources.csvs, the 0/1 column)."""
_ITEM = ("task", "depth", "trial")
"""What identifies an item within a length (the columns a source has)."""


def keys_needed(half_width: float = HALF_WIDTH, accuracy: float = ABSOLUTE) -> int:
    """Keys per length for a 95% half-width of `half_width` on an accuracy near `accuracy` (normal
    approximation), and never fewer than the `inference.MIN_UNITS` an interval needs: 48 at the defaults."""
    z = 1.959963984540054
    return max(inf.MIN_UNITS, math.ceil(z * z * accuracy * (1 - accuracy) / half_width**2))


def keys_note(keys_per_length: int, depths: int | None = None) -> str | None:
    """What `keys_per_length` gives the effective length's interval, when it is too few (else None)."""
    need = keys_needed()
    if keys_per_length >= need:
        return None
    what = "no interval" if keys_per_length < inf.MIN_UNITS else "a wide interval"
    setting = f" (eval.passkey_trials >= {math.ceil(need / depths)} at {depths} depths)" if depths else ""
    return (
        f"effective context length: {keys_per_length} keys per length gives {what}; a 95% half-width of "
        f"{HALF_WIDTH:g} on an accuracy near {ABSOLUTE:g} needs >= {need} keys per length{setting}"
    )


class EffectiveLengthRow(ArmRow):
    """One arm's effective length on one retrieval source under one threshold."""

    source: str
    threshold: Literal["absolute", "relative"]
    level: float | None = None
    """The accuracy a length must reach (absolute 0.856, or 90% of the arm's accuracy within L0)."""
    length: int | None = None
    """The estimate: the longest evaluated length passing (0 = below the shortest evaluated length)."""
    censored: Literal["", "below", "above"] = ""
    """'below': fails at the shortest evaluated length; 'above': passes at the longest (the length is ">=")."""
    low: int | None = None
    high: int | None = None
    """95% bootstrap interval of `length` (0 = below the shortest; the longest = at least that)."""
    lengths: list[int] = []
    """The evaluated lengths."""
    n_units: int = 0
    """Items (keys) per length, the smallest over lengths."""
    n_seeds: int = 1
    note: str = ""

    def column(self) -> str:
        return f"{NAME}_{self.source}_{'abs' if self.threshold == 'absolute' else 'rel'}"

    def show(self, value: int | None) -> str:
        if value is None:
            return ""
        if value == 0:
            return f"< {self.lengths[0]}"
        return f">= {value}" if value == self.lengths[-1] else str(value)

    def cell(self) -> str:
        """``1024 [256, >= 2048] (n=24)``, ``< 256 [...]``, or the note."""
        if self.length is None:
            return self.note
        if self.low is None or self.high is None:
            return self.show(
                self.length
            )  # fewer than MIN_UNITS items: no interval (the table's caption says)
        return f"{self.show(self.length)} [{self.show(self.low)}, {self.show(self.high)}]"


def longest_passing(acc: np.ndarray, level: np.ndarray | float) -> np.ndarray:
    """Per row of accuracies by length (..., k): index + 1 of the last length of the run of passing lengths
    from the shortest (0 = the shortest fails)."""
    passing = acc >= np.asarray(level)[..., None] - 1e-12
    return np.cumprod(passing, axis=-1).sum(axis=-1)


def items_by_length(frames: list[pd.DataFrame], column: str) -> dict[int, np.ndarray] | None:
    """Per length, each item's outcome averaged over seeds (items every seed has); None when nothing is shared."""
    keys = [c for c in _ITEM if c in frames[0].columns]
    joined = None
    for i, f in enumerate(frames):
        part = f[["length", *keys, column]].rename(columns={column: f"y{i}"})
        joined = part if joined is None else joined.merge(part, on=["length", *keys])
    if joined is None or joined.empty:
        return None
    cols = [f"y{i}" for i in range(len(frames))]
    return {
        int(L): g[cols].to_numpy(dtype=float).mean(axis=1)
        for L, g in joined.sort_values(keys).groupby("length")
    }


def estimate(
    items: dict[int, np.ndarray],
    L0: int | None,
    threshold: str,
    rng: np.random.Generator,
    draws: int = BOOTSTRAP,
) -> dict[str, object]:
    """The effective length and its bootstrap interval from per-item outcomes by length."""
    lengths = sorted(items)
    within = [L for L in lengths if L0 is not None and L <= L0]
    if threshold == "relative" and not within:
        return {"note": "no length within L0 to be relative to"}

    def levels(acc: np.ndarray) -> np.ndarray:
        if threshold == "absolute":
            return np.full(acc.shape[:-1], ABSOLUTE)
        weights = np.array([len(items[L]) if L in within else 0 for L in lengths], dtype=float)
        return RELATIVE * (acc * weights).sum(axis=-1) / weights.sum()

    acc = np.array([items[L].mean() for L in lengths])
    level = float(levels(acc))
    if threshold == "relative" and not level > 0:
        return {"level": level, "note": "no retrieval within L0 to be relative to"}
    boot = np.stack(
        [rng.choice(items[L], size=(draws, len(items[L])), replace=True).mean(axis=1) for L in lengths],
        axis=1,
    )
    index = int(longest_passing(acc, level))
    grid = [0, *lengths]
    found: dict[str, object] = {
        "level": level,
        "length": grid[index],
        "censored": "below" if index == 0 else "above" if index == len(lengths) else "",
    }
    if min(len(v) for v in items.values()) < inf.MIN_UNITS:
        return found  # a bootstrap over a handful of keys covers nothing it promises
    may_fail, may_pass = unsettled(items, lengths, level)
    low_boot, high_boot = boot.copy(), boot.copy()
    low_boot[:, may_fail], high_boot[:, may_pass] = -np.inf, np.inf
    low = int(np.quantile(longest_passing(low_boot, levels(boot)), 0.025, method="inverted_cdf"))
    high = int(np.quantile(longest_passing(high_boot, levels(boot)), 0.975, method="inverted_cdf"))
    return found | {"low": grid[low], "high": grid[high]}


def unsettled(
    items: dict[int, np.ndarray], lengths: list[int], level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Lengths where every item is right (or every one wrong), so that no bootstrap draw can fail (pass) there,
    yet the exact binomial bound does not settle it: all n right gives a one-sided 97.5% lower bound
    0.025^(1/n) on the accuracy (0.926 at 48 keys), all wrong an upper bound 1 - 0.025^(1/n). Where the bound does
    not clear `level`, the interval's low end takes the length as failing (`may_fail`) and its high end as passing
    (`may_pass`), as a bootstrap that could move it would."""
    acc = np.array([items[L].mean() for L in lengths])
    bound = 0.025 ** (1.0 / np.array([len(items[L]) for L in lengths]))
    return (acc >= 1.0) & (bound < level), (acc <= 0.0) & (1.0 - bound >= level)


def _frames(data: Measured, arm: Arm, csv: str) -> list[pd.DataFrame] | None:
    by_tag = {s.tag: s for s in data.sources.tags} if data.sources else {}
    frames = [by_tag[t].csvs.get(csv) for t in arm.tags if t in by_tag]
    if not frames or any(f is None or f.empty for f in frames):
        return None
    return frames  # type: ignore[return-value]


def _retrieves(data: Measured, csv: str, column: str) -> bool:
    """Any tag has a correct item in this source (generation scores all 0 at small scale: nothing to measure)."""
    return any(
        csv in s.csvs and float(pd.to_numeric(s.csvs[csv][column], errors="coerce").sum()) > 0
        for s in (data.sources.tags if data.sources else [])
    )


def analyse(data: Measured, seed: int = 0, draws: int = inf.SIGN_FLIP_DRAWS) -> list[EffectiveLengthRow]:
    """Every arm's effective length per retrieval source that has items, under both thresholds."""

    del draws  # the bootstrap has its own count
    L0 = short_length(data)
    rows = []
    for source, (csv, column) in SOURCES.items():
        if source.endswith("generation") and not _retrieves(data, csv, column):
            continue
        for arm in data.arms:
            frames = _frames(data, arm, csv)
            if frames is None:
                continue
            items = items_by_length(frames, column)
            for threshold in ("absolute", "relative"):
                base = dict(source=source, threshold=threshold)
                if not items:
                    rows.append(EffectiveLengthRow.of(arm, **base, note="no items every seed scored"))
                    continue
                got = estimate(
                    items, L0, threshold, inf.rng_for(seed, f"{NAME}:{arm.key}/{source}/{threshold}")
                )
                rows.append(
                    EffectiveLengthRow.of(
                        arm,
                        **base,
                        **got,
                        lengths=sorted(items),
                        n_units=min(len(v) for v in items.values()),
                        n_seeds=len(frames),
                    )
                )
    return rows


def wide_columns(rows: list[EffectiveLengthRow], baseline: str) -> dict[str, dict[str, object]]:
    """results.csv cells per arm: the length, ``_ci_low``, ``_ci_high``, ``_censored`` and ``_n_units``."""
    del baseline
    out: dict[str, dict[str, object]] = {}
    for r in rows:
        name, cells = r.column(), out.setdefault(r.arm, {})
        cells[name] = r.length
        cells[f"{name}_ci_low"], cells[f"{name}_ci_high"] = r.low, r.high
        cells[f"{name}_censored"] = r.censored if r.length is not None else ""
        cells[f"{name}_n_units"] = r.n_units if r.length is not None else None
    return out
