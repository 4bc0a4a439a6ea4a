"""The estimands long-context papers report without intervals, each defined once here with its row model.

Each module has `analyse(data, seed, draws) -> list[Row]` (one typed row per arm and cell, `Row` its pydantic
model) and `wide_columns(rows, baseline) -> {arm: {column: value}}` (its results.csv cells, values with
`_ci_low`, `_ci_high` and `_n_units`); `collect` runs them all into `ReportData.estimands`, `wide` writes their
columns on each tag row of the arm, and `section` renders them in one compact report section. docs/estimands.md
explains each with its reference.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlab.records.base import Record

if TYPE_CHECKING:
    from rlab.report.assemble.measured import Measured
    from rlab.report.estimands.effective_length import EffectiveLengthRow
    from rlab.report.estimands.key_tokens import KeyTokenRow
    from rlab.report.estimands.retention import RetentionRow


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


@dataclass(frozen=True)
class EstimandRows:
    """Every estimand's typed rows for one report, a field per `ESTIMANDS` name (empty: nothing to estimate)."""

    short_context_retention: list[RetentionRow] = field(default_factory=list)
    effective_length: list[EffectiveLengthRow] = field(default_factory=list)
    key_token_bpb: list[KeyTokenRow] = field(default_factory=list)

    def of(self, e: Estimand) -> list[Record]:
        return list(getattr(self, e.name))


def _module(e: Estimand) -> Any:
    return importlib.import_module(f"rlab.report.estimands.{e.module}")


def analyse_all(data: Measured, seed: int, draws: int) -> EstimandRows:
    """Every estimand's rows for one report."""
    return EstimandRows(**{e.name: _module(e).analyse(data, seed, draws) for e in ESTIMANDS})


def wide_cells(rows: EstimandRows, baseline: str) -> dict[str, dict[str, object]]:
    """Per arm, every estimand's results.csv cells (from `analyse_all`'s `rows`)."""
    out: dict[str, dict[str, object]] = {}
    for e in ESTIMANDS:
        for arm, cells in _module(e).wide_columns(rows.of(e), baseline).items():
            out.setdefault(arm, {}).update(cells)
    return out
