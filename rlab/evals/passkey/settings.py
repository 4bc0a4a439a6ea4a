"""Passkey's own settings: the prompt lengths, needle depths and trials of its grid."""

from __future__ import annotations

from typing import Annotated

from pydantic import field_validator

from rlab.evals.settings import EvalSettings
from rlab.spec.bounds import EvalLength, NonEmpty, Trials

PASSKEY_MAX_DEPTH = 0.9
"""The needle is placed after at most this fraction of the filler, so filler always separates it from the question."""


class PasskeySettings(EvalSettings):
    """Passkey's grid: lengths x depths x trials."""

    passkey_lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """Passkey prompt lengths in tokens; null = the eval lengths."""
    passkey_depths: Annotated[tuple[float, ...], NonEmpty()] = (0.0, 0.25, 0.5, 0.75)
    """Where the needle sits: the fraction of the filler before it (at most 0.9, so the key is never next to
    the question)."""
    passkey_trials: Trials = 20
    """Trials per (length, depth), each with its own random key in 1..50000 (YaRN's range)."""

    def own_lengths(self) -> tuple[int, ...] | None:
        return self.passkey_lengths

    @field_validator("passkey_depths")
    @classmethod
    def _depths(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        for d in value:
            if not 0.0 <= d <= PASSKEY_MAX_DEPTH:
                raise ValueError(
                    f"each depth must be within [0, {PASSKEY_MAX_DEPTH}] (got {d}): deeper puts the "
                    "key next to the question"
                )
        if not value:
            raise ValueError("at least one depth")
        return value
