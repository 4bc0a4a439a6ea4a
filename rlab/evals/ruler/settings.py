"""The RULER-style tasks' own settings: which tasks, at which lengths, how many examples."""

from __future__ import annotations

from typing import Annotated, Literal

from rlab.evals.settings import EvalSettings
from rlab.spec.bounds import EvalLength, NonEmpty, Trials

RulerTaskName = Literal["niah_multikey", "niah_multivalue", "vt", "cwe"]


class RulerSettings(EvalSettings):
    """The RULER-style grid: tasks x lengths x trials."""

    ruler_tasks: Annotated[tuple[RulerTaskName, ...], NonEmpty()] = (
        "niah_multikey",
        "niah_multivalue",
        "vt",
        "cwe",
    )
    """RULER-style tasks (Hsieh et al. 2024): multi-key and multi-value needles, variable tracking,
    common-word extraction. See rlab.evals.ruler.tasks."""
    ruler_lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """Total lengths (prompt + answer) of the RULER-style tasks; null = the eval lengths."""
    ruler_trials: Trials = 20
    """Independently generated examples per (task, length)."""

    def own_lengths(self) -> tuple[int, ...] | None:
        return self.ruler_lengths
