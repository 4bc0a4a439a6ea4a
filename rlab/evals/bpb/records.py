"""Train/val BPB's files: its eval.json section (`BpbMetric`) and bpb_docs.csv (`BpbDoc`)."""

from __future__ import annotations

from typing import ClassVar

from rlab.records.base import Record
from rlab.records.sections import Section


class BpbSplit(Record):
    """BPB of one split over a fixed set of whole documents."""

    bpb: float | None
    nats: float
    bytes: int
    tokens: int
    """Scored target tokens (special tokens excluded)."""
    docs: int
    """Documents scored (each whole, each once)."""
    docs_available: int
    """Documents in the split's pool (see `rlab.evals.bpb.score`)."""
    token_budget: int
    whole_split: bool
    """True when the budget exceeded the pool: every document was scored once, none twice."""
    window: int
    """Targets per forward window (the model's training length); longer documents span several windows."""


class BpbMetric(Section):
    convention: str
    train: BpbSplit | None = None
    val: BpbSplit | None = None

    def headline(self) -> str | None:
        return f"val bpb {self.val.bpb:.4f}" if self.val is not None else None

    def card_lines(self) -> list[str]:
        return [
            f"- {name} BPB {split.bpb:.4f} ({split.docs} whole documents, {split.tokens:,} tokens)"
            for name, split in (("train", self.train), ("val", self.val))
            if split is not None and split.bpb is not None
        ]


class BpbDoc(Record):
    """A document train/val BPB scored: recorded so that two evals can be shown to score the same text."""

    columns: ClassVar[tuple[str, ...]] = ("split", "doc", "sha256", "tokens")
    split: str
    doc: str
    """`<shard file stem>:<row>`."""
    sha256: str
    """Of the UTF-8 text, 16 hex."""
    tokens: int
