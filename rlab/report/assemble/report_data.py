"""What `collect` hands the renderers: one experiment's frames, arms, estimates and comparisons (`ReportData`).

Built once by `rlab.report.assemble.collect.assemble` (one experiment, or several for `compare`): first
`rlab.report.assemble.measured.Measured`, what the tags measured and how the arms compare, which the analyses
read (copy distance, estimands); then `ReportData`, the same plus those analyses and results.csv's frame. Read by
the tables, plots, headline and document builders. Nothing here computes or renders.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import pandas as pd

from rlab.report.assemble.measured import Measured
from rlab.report.estimands import EstimandRows


@dataclass(kw_only=True)
class ReportData(Measured):
    """`Measured` with the analyses that read it and the wide frame behind results.csv."""

    copy_cells: pd.DataFrame | None
    """The copy-by-distance cells and their copy-family verdicts (`rlab.report.copy_distance.section.analyse`)."""
    copy_retention: pd.DataFrame | None
    """The copy's retention beyond L0 per arm and distance, verdicts in the same family (`copy_retention`)."""
    estimands: EstimandRows
    """`rlab.report.estimands` name -> its typed rows (short-context retention, ...)."""
    results: pd.DataFrame
    """The wide frame behind results.csv (`rlab.report.assemble.wide.wide_frame`)."""

    @classmethod
    def of(
        cls,
        measured: Measured,
        *,
        copy_cells: pd.DataFrame | None,
        copy_retention: pd.DataFrame | None,
        estimands: EstimandRows,
        results: pd.DataFrame,
    ) -> ReportData:
        """`measured` (its very frames, not copies) with its analyses and results.csv's frame."""
        shared = {f.name: getattr(measured, f.name) for f in fields(Measured)}
        return cls(
            **shared,
            copy_cells=copy_cells,
            copy_retention=copy_retention,
            estimands=estimands,
            results=results,
        )
