"""Likelihood-scored retrieval's records, shared by passkey and the RULER-style tasks: one `ChoiceTrial` per item
(passkey_choices.csv, ruler_choices.csv) and the `likelihood` summary inside each section."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rlab.records.base import Record


class ChoiceTrial(Record):
    """One item scored by likelihood (passkey_choices.csv, ruler_choices.csv; `rlab.evals.retrieval.likelihood`):
    the right value's mean log-probability per token against the best distractor's. The unit of its intervals."""

    columns: ClassVar[tuple[str, ...]] = (
        "task",
        "length",
        "depth",
        "trial",
        "right_logp",
        "best_other_logp",
        "margin",
        "correct",
    )
    task: str
    length: int
    depth: float | None = None
    """passkey only: the needle's depth."""
    trial: int
    right_logp: float
    best_other_logp: float
    margin: float
    """right_logp - best_other_logp (nats/token; > 0 = correct)."""
    correct: int


class ChoiceCell(Record):
    """Likelihood-scored retrieval over the items of one length (and task)."""

    task: str | None = None
    length: int
    accuracy: float
    margin: float
    n: int


class LikelihoodRetrieval(Record):
    """Passkey / RULER-style items scored by likelihood, beside their generation score (section `likelihood`)."""

    scoring: str
    choices: int
    """Candidates per item: the right value and choices - 1 distractors of the same form."""
    chance: float
    accuracy: float | None
    margin: float | None
    n: int
    by_length: list[ChoiceCell]
    by_task: list[ChoiceCell] = Field(default_factory=list)

    def card_line(self, name: str) -> str:
        """One README bullet: accuracy and margin per length (`rlab.export.card`)."""
        cells = ", ".join(f"{c.length}: {c.accuracy:.2f} (margin {c.margin:+.2f})" for c in self.by_length)
        return f"- {name} by likelihood ({self.choices} choices, chance {self.chance:.2f}): {cells}"
