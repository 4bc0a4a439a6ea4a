"""Passkey's files: its eval.json section (`PasskeyMetric`), passkey.csv (`PasskeyCell`), passkey_trials.csv
(`PasskeyTrial`); passkey_choices.csv is `rlab.evals.retrieval.records.ChoiceTrial`."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rlab.evals.retrieval.records import LikelihoodRetrieval
from rlab.records.base import Record
from rlab.records.sections import Section, Skipped


class PasskeyCell(Record):
    columns: ClassVar[tuple[str, ...]] = ("length", "depth", "accuracy", "n")
    length: int
    depth: float
    accuracy: float
    n: int
    """Trials, each with its own key (independent units)."""
    correct: int | None = None


class PasskeyLength(Record):
    """All depths of one length pooled: n = depths x trials independent keys."""

    length: int
    accuracy: float
    correct: int
    n: int


class PasskeyTrial(Record):
    """One trial (passkey_trials.csv): the unit the report's intervals count."""

    columns: ClassVar[tuple[str, ...]] = ("length", "depth", "trial", "key", "correct")
    length: int
    depth: float
    trial: int
    key: str
    correct: int


class PasskeyMetric(Section):
    protocol: str | None = None
    lengths: list[int]
    depths: list[float]
    trials: int
    units: int | None = None
    overall: float | None
    by_length: list[PasskeyLength] = Field(default_factory=list)
    cells: list[PasskeyCell]
    skipped: list[Skipped] = Field(default_factory=list)
    likelihood: LikelihoodRetrieval | None = None
    """The same keys scored by likelihood (eval.retrieval_choices; null = not run)."""

    def headline(self) -> str | None:
        return f"passkey {self.overall:.2f}" if self.overall is not None else None

    def card_lines(self) -> list[str]:
        cells = ", ".join(f"{r.length}: {r.accuracy:.2f} (n={r.n})" for r in self.by_length)
        lines = [f"- passkey accuracy by length: {cells}"]
        return lines + ([self.likelihood.card_line("passkey")] if self.likelihood is not None else [])
