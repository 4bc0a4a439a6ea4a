"""How the copy section lays out arms: a row per arm and a cell per window, or a `; `-list in an answer line."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from rlab.report.render import document as doc
from rlab.report.stats.verdicts import Verdict


def arm_window_rows(
    frame: pd.DataFrame, windows: list[int], cell: Callable[[pd.Series], doc.Cell]
) -> list[list[doc.Cell]]:
    """A table's rows: one per arm (first-seen order), the arm then `cell` of its row at each window ('' where
    it has none)."""
    rows = []
    for arm in dict.fromkeys(frame["arm"]):
        hits = [frame[(frame["arm"] == arm) & (frame["window"] == w)] for w in windows]
        rows.append([doc.Cell(str(arm)), *(doc.Cell("") if h.empty else cell(h.iloc[0]) for h in hits)])
    return rows


def each_variant(
    at: pd.DataFrame, words: Callable[[pd.Series], str], verdict: Callable[[pd.Series], doc.Span | None]
) -> list[doc.Part]:
    """An answer line's list of the arms at one distance: each row's `words` then its verdict, `; `-separated."""
    parts: list[doc.Part] = []
    for i, (_, r) in enumerate(at.iterrows()):
        parts += [("; " if i else "") + words(r), verdict(r) or doc.verdict(Verdict.NONE)]
    return parts
