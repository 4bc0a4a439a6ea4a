"""The estimands long-context papers report without intervals, each defined once here with its row model.

Each module has `analyse(data, seed, draws) -> list[Row]` (one typed row per arm and cell, `Row` its pydantic
model) and `wide_columns(rows, baseline) -> {arm: {column: value}}` (its results.csv cells, values with
`_ci_low`, `_ci_high` and `_n_units`); `collect` runs them all into `ReportData.estimands`, `wide` writes their
columns on each tag row of the arm, and `section` renders them in one compact report section. docs/estimands.md
explains each with its reference.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlab.records.base import Record

if TYPE_CHECKING:
    from rlab.report.assemble.report_data import Measured


@dataclass(frozen=True)
class Estimand:
    name: str
    title: str
    reference: str
    module: str
    """`rlab.report.estimands.<module>`: its `analyse`, `wide_columns` and row model."""


ESTIMANDS: tuple[Estimand, ...] = (
    Estimand(
        "short_context_retention",
        "Short-context retention",
        "LongRoPE2 (Shang et al. 2025)",
        "retention",
    ),
    Estimand(
        "effective_length",
        "Effective context length",
        "RULER (Hsieh et al. 2024), HELMET (Yen et al. 2025)",
        "effective_length",
    ),
    Estimand("key_token_bpb", "Key-token BPB", "LongPPL (Fang et al., ICLR 2025)", "key_tokens"),
)


def _module(e: Estimand) -> Any:
    return importlib.import_module(f"rlab.report.estimands.{e.module}")


def analyse_all(data: Measured, seed: int, draws: int) -> dict[str, list[Record]]:
    """Every estimand's rows for one report."""
    return {e.name: _module(e).analyse(data, seed, draws) for e in ESTIMANDS}


def wide_cells(rows: dict[str, list[Record]], baseline: str) -> dict[str, dict[str, object]]:
    """Per arm, every estimand's results.csv cells (from `analyse_all`'s `rows`)."""
    out: dict[str, dict[str, object]] = {}
    for e in ESTIMANDS:
        for arm, cells in _module(e).wide_columns(rows[e.name], baseline).items():
            out.setdefault(arm, {}).update(cells)
    return out
