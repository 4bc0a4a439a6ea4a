"""One arm's numbers and verdicts as the tables and the prose show them: its scalar, its comparison with its
reference, the verdict's words with the MDE beside "within noise", and the phrases the tables' about lines share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from rlab.report.assemble.report_data import ReportData
from rlab.report.render.table_model import BLANK
from rlab.report.stats.verdicts import Verdict, mde_label, row_seed_limited

VERDICT_SHORT = {Verdict.BETTER: "better", Verdict.WORSE: "worse", Verdict.WITHIN_NOISE: "≈"}


def mde_text(comp: pd.Series, short: bool = False) -> str:
    """``MDE 0.0123`` (or ``MDE 0.68%`` for BPB): the smallest difference the verdict's test would find with 80%
    power at its family's alpha / m; '' where there is none."""
    mde, rel = comp.get("mde", math.nan), comp.get("mde_rel_pct", math.nan)
    if mde is None or pd.isna(mde):
        return BLANK
    label = mde_label(row_seed_limited(comp))  # its seeds set the MDE (`inference.Comparison.seed_limited`)
    if rel is not None and not pd.isna(rel):
        return f"{label} {rel:.2f}%" if short else f"{label} {rel:.2f}% ({mde:.4f})"
    return f"{label} {mde:.4f}"


def verdict_of(comp: pd.Series | None) -> Verdict | None:
    """The typed verdict of a comparison row (None without one)."""
    if comp is None:
        return None
    v = Verdict(comp["verdict"])
    return None if v is Verdict.NONE else v


@dataclass
class VerdictRows:
    """A table's rows as they are built, and the verdicts that colour its cells (`Table.verdicts`)."""

    rows: list[dict[str, str]] = field(default_factory=list)
    verdicts: dict[tuple[int, str], Verdict] = field(default_factory=dict)

    def mark(self, column: str, comp: pd.Series | None) -> None:
        """Colour `column` of the row not yet appended by `comp`'s verdict (none: the cell stays plain)."""
        if (word := verdict_of(comp)) is not None:
            self.verdicts[(len(self.rows), column)] = word


def verdict_text(comp: pd.Series | None, short: bool = False) -> str:
    """A comparison's verdict as a table shows it: the word (``≈`` when `short`), the unit count when there are too
    few, and the MDE beside every "within noise"."""
    if comp is None:
        return BLANK
    v = Verdict(comp["verdict"])
    n = None if pd.isna(comp.get("n_units")) else int(comp["n_units"])
    word = VERDICT_SHORT.get(v, v.label(n)) if short else v.label(n)
    if v is Verdict.WITHIN_NOISE and (mde := mde_text(comp, short)):
        return f"{word}; {mde}" if short else f"{word} ({mde})"
    return word


def scalar(data: ReportData, arm: str, metric: str) -> tuple[float, float, float, object]:
    """(value, ci_low, ci_high, n_units) of one arm's metric (NaNs when absent)."""
    s = data.scalars
    hit = s[(s["arm"] == arm) & (s["metric"] == metric)]
    if hit.empty:
        return math.nan, math.nan, math.nan, pd.NA
    r = hit.iloc[0]
    return float(r["value"]), float(r["ci_low"]), float(r["ci_high"]), r["n_units"]


def comparison(data: ReportData, arm: str, metric: str) -> pd.Series | None:
    c = data.comparisons
    hit = c[(c["arm"] == arm) & (c["metric"] == metric)]
    return None if hit.empty or arm == data.baseline_arm else hit.iloc[0]


def significant_best(data: ReportData, metric: str, col: str, order: list[str]) -> set[tuple[int, str]]:
    """The best cell of a column, marked only when that arm beats every other arm beyond noise
    (`ReportData.best`)."""
    arm = data.best.get(metric)
    return {(order.index(arm), col)} if arm in order else set()


def train_lengths(data: ReportData) -> set[int]:
    """The continued-training length(s) (zero-shot arms and the base keep the base's length)."""
    rows = data.meta[data.meta["kind"] == "continued"]
    return set(rows["train_seq_len"].dropna().astype(int))


def references_note(data: ReportData) -> str:
    """What zero-shot arms are compared with, when that differs from the baseline (else '')."""
    c = data.comparisons
    refs = sorted(set(c[c["kind"] == "zero-shot"]["reference"])) if len(c) else []
    refs = [r for r in refs if r != data.baseline_arm]
    if not refs:
        return ""
    return (
        f" Zero-shot arms are compared with {' / '.join(f'`{r}`' for r in refs)} (the RoPE change alone, "
        f"nothing trained); every other arm with `{data.baseline_arm}`."
    )


def units_phrase(data: ReportData, metric: str) -> str:
    ns = data.scalars[data.scalars["metric"] == metric]["n_units"].dropna()
    return (
        f"n = {int(ns.min())}" + (f"–{int(ns.max())}" if len(ns) and ns.max() != ns.min() else "")
        if len(ns)
        else ""
    )
