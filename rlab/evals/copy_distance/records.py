"""Copy by distance's files: its eval.json section (`CopyDistanceMetric`) and copy_distance.csv (`CopyRow`)."""

from __future__ import annotations

from typing import ClassVar

from rlab.records.base import Record
from rlab.records.sections import Section


class CopyWindow(Record):
    """Copy-by-distance at one window: mean losses over its records (intervals are the report's)."""

    window: int
    distance: int
    """Tokens from the passage's first occurrence to its repeat."""
    control_nats: float
    """Mean loss per token on the repeat's tokens in the control window (another passage in place of the first)."""
    copy_nats: float
    """Mean loss per token on the repeat."""
    gain: float
    """control_nats - copy_nats: nats per token the model saves by looking back `distance` tokens."""
    copy_acc: float
    """Greedy hit rate on the repeat."""
    n: int
    """Records (the independent units)."""


class CopyDistanceMetric(Section):
    passage: int
    prefix: int
    windows: list[CopyWindow]
    nested: bool = False
    """Records are nested across windows (the same passage, control and filler; only the gap varies), so a
    record's gains at two distances are paired; absent (false) in files of older rlab versions."""

    def card_lines(self) -> list[str]:
        cells = ", ".join(f"d={w.distance}: {w.gain:+.3f}" for w in self.windows)
        return [f"- copy gain by distance (nats/token): {cells}"]


class CopyRow(Record):
    """One copy-by-distance record at one window (rlab.evals.copy_distance.task): the report's resampling unit."""

    columns: ClassVar[tuple[str, ...]] = (
        "window",
        "distance",
        "record",
        "control_nats",
        "copy_nats",
        "copy_acc",
        "tokens",
    )
    window: int
    distance: int
    record: int
    control_nats: float
    copy_nats: float
    copy_acc: float
    tokens: int
    """Scored targets per copy (the passage length - 1)."""
