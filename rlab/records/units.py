"""bpb_units.csv: the units behind every BPB number, one file shared by the sections that measure BPB."""

from __future__ import annotations

from typing import ClassVar

from rlab.records.base import Record


class BpbUnit(Record):
    """One unit of a BPB metric: `metric` is train, val or len_<L>; the report resamples units by `doc`."""

    columns: ClassVar[tuple[str, ...]] = ("section", "metric", "unit", "doc", "nats", "bytes", "tokens")
    section: str
    """The eval.json section that owns the unit (a partial re-eval replaces only its sections' units)."""
    metric: str
    unit: str
    """Unit id, the same across tags evaluated on the same data (train/val: the document id; lengths: block index)."""
    doc: str
    """The document the unit belongs to (the cluster for resampling)."""
    nats: float
    bytes: int
    tokens: int
