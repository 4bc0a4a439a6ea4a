"""A table as the renderers take it: display strings, highlighted cells and verdicts, rows in arm order.

Builders (`rlab.report.render.tables`, `rlab.report.render.retrieval`, ...) fill `Table`s; the document model, markdown/HTML and
the CLI's rich view render them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rlab.report.assemble.report_data import ReportData
from rlab.report.sources.arms import KIND_ORDER
from rlab.report.stats.verdicts import Verdict

BLANK = ""
"""An empty cell."""


# ----- cells: a number as the tables show it (blank for a missing one)


def fmt(value: float, digits: int = 4) -> str:
    return (
        BLANK if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"
    )


def plus_minus(value: float, low: float, high: float, digits: int = 4) -> str:
    if math.isnan(value):
        return BLANK
    if math.isnan(low) or math.isnan(high):
        return fmt(value, digits)
    return f"{value:.{digits}f} ± {(high - low) / 2:.{digits}f}"


def signed(value: float, digits: int, unit: str = "") -> str:
    return BLANK if math.isnan(value) else f"{value:+.{digits}f}{unit}"


def change_cell(value: float, low: float, high: float, digits: int = 2, unit: str = "%") -> str:
    """``+1.23% [+0.80, +1.70]``."""
    if math.isnan(value):
        return BLANK
    if math.isnan(low) or math.isnan(high):
        return signed(value, digits, unit)
    return f"{value:+.{digits}f}{unit} [{low:+.{digits}f}, {high:+.{digits}f}]"


def count_cell(value: Any) -> str:
    return BLANK if value is None or pd.isna(value) else str(int(value))


@dataclass
class Table:
    title: str
    frame: pd.DataFrame
    """Display strings; the first column labels the rows."""
    best: set[tuple[int, str]] = field(default_factory=set)
    """(row position, column name) of cells to highlight."""
    caption: str = ""
    about: str = ""
    """What the table measures: which data, which lengths, which units."""
    verdicts: dict[tuple[int, str], Verdict] = field(default_factory=dict)
    """(row position, column name) -> the verdict that cell states (renderers colour it by the enum)."""


def arm_order(data: ReportData) -> list[str]:
    """Rows: the baseline arm first, then continued arms in the spec's variant order, then zero-shot, then base."""
    spec_variants = data.sources.variants if data.sources is not None else []

    def key(arm) -> tuple:
        v = arm.variant
        return (
            arm.key != data.baseline_arm,
            KIND_ORDER.index(arm.kind),
            spec_variants.index(v) if v in spec_variants else len(spec_variants),
            arm.key,
        )

    return [a.key for a in sorted(data.arms, key=key)]
