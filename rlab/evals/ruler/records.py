"""The RULER-style tasks' files: their eval.json section (`RulerMetric`), ruler.csv (`RulerCell`),
ruler_trials.csv (`RulerTrial`); ruler_choices.csv is `rlab.evals.retrieval.records.ChoiceTrial`."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rlab.evals.retrieval.records import LikelihoodRetrieval
from rlab.records.base import Record
from rlab.records.sections import LongDocsSummary, Section


class RulerCell(Record):
    """Mean score of one RULER-style task at one length (ruler.csv)."""

    columns: ClassVar[tuple[str, ...]] = ("task", "length", "score", "n")
    task: str
    length: int
    score: float
    n: int
    """Generated examples (independent units)."""


class RulerLength(Record):
    length: int
    score: float
    """Mean over the tasks run at this length."""
    tasks: int
    n: int


class RulerTrial(Record):
    """One generated example's score in [0, 1] (ruler_trials.csv)."""

    columns: ClassVar[tuple[str, ...]] = ("task", "length", "trial", "score")
    task: str
    length: int
    trial: int
    score: float


class RulerSkipped(Record):
    task: str
    length: int
    reason: str


class RulerMetric(Section):
    """RULER-style subset (`rlab.evals.ruler.tasks`): task definitions after Hsieh et al. 2024; not RULER scores."""

    name: str
    citation: str
    scoring: str
    tasks: list[str]
    lengths: list[int]
    trials: int
    units: int
    max_new_tokens: dict[str, int]
    max_new_tokens_rule: str | None = None
    by_task: list[RulerCell]
    by_length: list[RulerLength]
    skipped: list[RulerSkipped] = Field(default_factory=list)
    long_docs: LongDocsSummary | None = None
    likelihood: LikelihoodRetrieval | None = None
    """The same examples scored by likelihood (eval.retrieval_choices; null = not run)."""

    def headline(self) -> str | None:
        if not self.by_length:
            return None
        return f"RULER-style {sum(r.score for r in self.by_length) / len(self.by_length):.2f}"

    def card_lines(self) -> list[str]:
        cells = ", ".join(f"{r.length}: {r.score:.2f}" for r in self.by_length)
        lines = [f"- RULER-style mean score by length: {cells}"]
        return lines + ([self.likelihood.card_line("RULER-style")] if self.likelihood is not None else [])
