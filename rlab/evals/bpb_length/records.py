"""BPB vs length's files: its eval.json section (`BpbLengthMetric`) and bpb_by_length.csv (`LengthRow`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rlab.records.base import Record
from rlab.records.sections import LongDocsSummary, Section, Skipped


class LengthRow(Record):
    columns: ClassVar[tuple[str, ...]] = ("length", "bpb", "tokens", "docs")
    length: int
    bpb: float | None
    tokens: int
    docs: int
    block: int | None = None
    blocks: int | None = None
    context_min: int | None = None
    context_max: int | None = None
    short_docs: int | None = None
    ppl: float | None = None
    """sliding/truncated protocols: YaRN's perplexity, exp(mean over windows of each window's mean NLL)."""
    windows: int | None = None
    """sliding/truncated protocols: forward windows scored at this length."""


class TargetLoss(Record):
    """One scored target of BPB vs length at one length (bpb_targets.csv, same_targets protocol): the units of
    key-token BPB (`rlab.report.estimands.key_tokens`). `unit` and `position` name the same text at every length."""

    columns: ClassVar[tuple[str, ...]] = ("length", "unit", "position", "token", "bytes", "repeat", "nats")
    length: int
    unit: str
    """The block (bpb_units.csv's unit id of `len_<length>`)."""
    position: int
    """The target's index within its block (0 .. B-1)."""
    token: int
    bytes: int
    repeat: int
    """Tokens back to the latest earlier copy of the bigram ending at this target in its document (0: none)."""
    nats: float


class BpbLengthMetric(Section):
    convention: str
    protocol: Literal["same_targets", "sliding", "truncated"] = "same_targets"
    """`eval.ppl_protocol`: same_targets (rlab's paired default) or YaRN's sliding/truncated perplexity."""
    block: int | None = None
    """same_targets: targets per block (B); null for the YaRN protocols."""
    longest: int
    start: int | None = None
    """same_targets: the first block's end e_0 (2 L_k: no window sees the document start; null: recorded before)."""
    document_start_in_view: bool | None = None
    """same_targets: True when no document allowed 2 L_k + 1 tokens, so the longest window sees the opening."""
    units: int | None = None
    """Independent units behind each length: blocks (same_targets) or documents (sliding/truncated)."""
    docs: int | None = None
    stride: int | None = None
    """sliding: YaRN's --sliding-window."""
    lengths: list[LengthRow]
    skipped: list[Skipped] = Field(default_factory=list)
    long_docs: LongDocsSummary | None = None

    def card_lines(self) -> list[str]:
        cells = ", ".join(f"{r.length}: {r.bpb:.4f}" for r in self.lengths if r.bpb is not None)
        return [f"- BPB by context length ({self.protocol}): {cells}"]
