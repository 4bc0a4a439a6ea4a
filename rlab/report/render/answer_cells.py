"""The Answer's cells: an estimate with its interval and verdict, a column, and how a cell reads.

`rlab.report.render.answer` builds the rows from the report's decided comparisons; this module holds the cell
types and their words (a "within noise" carries its MDE and, where the seeds rather than the units set it, says
so: `inference.Comparison.seed_limited`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from rlab.report.render import document as doc
from rlab.report.stats import verdicts as vd
from rlab.report.stats.verdicts import Verdict


@dataclass
class Estimate:
    """One cell: an estimate with its 95% interval and, for a comparison, its verdict (JSON: as is)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    unit: str = ""
    """``BPB``, ``%`` or '' (a ratio, a CORE difference)."""
    verdict: str | None = None
    """`verdicts.Verdict` value; None for a level (no test)."""
    mde: float | None = None
    n_units: int | None = None
    seed_limited: bool = False
    """Whether its seeds (not its units) set its MDE: the MDE then says so."""
    holm_only: bool = False
    """A "within noise" whose unadjusted interval of the difference excludes 0 (Holm kept it from a verdict)."""
    note: str = ""
    """Why a comparison column has no verdict ('' when it has one, or is a level)."""


@dataclass
class Column:
    key: str
    """The `AnswerRow` field it shows."""
    header: str
    definition: str
    """What it is, for the Methods section."""
    digits: int = 4
    signed: bool = True


def num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def count(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _number(e: Estimate, col: Column) -> str:
    assert e.value is not None
    digits, sign = col.digits, "+" if col.signed else ""
    value = f"{e.value:{sign}.{digits}f}{e.unit}"
    if e.low is None or e.high is None:
        return value
    half = (e.high - e.low) / 2
    if abs((e.high - e.value) - (e.value - e.low)) > 0.02 * max(half, 1e-12):  # asymmetric: the range
        return f"{value} [{e.low:{sign}.{digits}f}, {e.high:{sign}.{digits}f}]"
    return f"{value} ± {half:.{digits}f}"


BADGE = {
    Verdict.BETTER: "better",
    Verdict.WORSE: "worse",
    Verdict.WITHIN_NOISE: "within noise",
}


def badge(e: Estimate) -> str:
    """The verdict's words ('' for a level)."""
    if e.verdict is None:
        return ""
    v = Verdict(e.verdict)
    return BADGE.get(v, v.label(e.n_units))


def holm_only(comp: pd.Series) -> bool:
    """Whether a "within noise" comparison's unadjusted interval (`diff_low`, `diff_high`) excludes 0."""
    low, high = num(comp.get("diff_low")), num(comp.get("diff_high"))
    within = comp.get("verdict") == Verdict.WITHIN_NOISE.value
    return within and low is not None and high is not None and (low > 0 or high < 0)


def detail(e: Estimate, digits: int) -> str:
    """Beside the badge: the MDE of a "within noise" (and whether its seeds set it), "after Holm" where
    its unadjusted interval excludes 0 (the family's multiplicity, not the interval, kept it from a verdict), or
    why a tested column has no verdict."""
    if e.verdict != Verdict.WITHIN_NOISE.value:
        return "no verdict" if e.note else ""
    holm = "after Holm" if e.holm_only else ""
    mde = f"{vd.mde_label(e.seed_limited)} {e.mde:.{digits}f}{e.unit}" if e.mde is not None else ""
    return "; ".join(p for p in (holm, mde) if p)


def cell(e: Estimate | None, col: Column) -> doc.Cell:
    if e is None:
        return doc.Cell("")
    v = Verdict(e.verdict) if e.verdict else None
    text = "" if e.value is None else _number(e, col)
    return doc.Cell(text, v, badge=badge(e), detail=detail(e, col.digits))
