"""copy_distance's own settings: its windows and records per window."""

from __future__ import annotations

from typing import Annotated

from rlab.evals.settings import EvalSettings
from rlab.spec.bounds import EvalLength, NonEmpty, Trials


class CopyDistanceSettings(EvalSettings):
    """copy_distance's windows and records."""

    copy_lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """copy_distance windows in tokens (the copy's distance grows with the window); null = the BPB-vs-length lengths."""
    copy_trials: Trials = 32
    """copy_distance records per window (the independent units of its intervals)."""

    def own_lengths(self) -> tuple[int, ...] | None:
        return self.copy_lengths
