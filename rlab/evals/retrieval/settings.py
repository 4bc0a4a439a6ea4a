"""The setting passkey and the RULER-style tasks share: how many choices their likelihood scoring offers."""

from __future__ import annotations

from typing import Annotated

from pydantic import field_validator

from rlab.spec.base import StrictModel
from rlab.spec.bounds import InRange

MAX_CHOICES = 1000
"""Candidates per likelihood-scored retrieval item (each one more packed continuation of the prompt)."""


class RetrievalSettings(StrictModel):
    """Likelihood scoring of the retrieval items (a shared setting of `EvalSpec`: passkey and ruler read it)."""

    retrieval_choices: Annotated[int, InRange(0, MAX_CHOICES)] = 10
    """Passkey and RULER-style items are also scored by likelihood, beside generation: the right value against
    retrieval_choices - 1 distractors of the same form (mean log-probability per token, CORE's multiple-choice
    rule; chance = 1 / retrieval_choices). 0 = generation scores only. See rlab.evals.retrieval.likelihood."""

    @field_validator("retrieval_choices")
    @classmethod
    def _two_or_more(cls, value: int) -> int:
        if value == 1:
            raise ValueError("1 choice has nothing to beat; use 2 or more, or 0 for none")
        return value
