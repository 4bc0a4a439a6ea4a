"""DCLM CORE's own settings: which bundle, which of its tasks, how many examples each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, PositiveInt, StringConstraints, field_validator

from rlab.evals.settings import EvalSettings

CoreTaskPattern = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.*?!\[\]-]+$"
    ),
]
"""A CORE task label of the bundle's core.yaml, or a shell glob over them (`arc_*`)."""


class CoreSettings(EvalSettings):
    """Which CORE bundle and tasks, and how many examples of each."""

    not_hashed: ClassVar[tuple[str, ...]] = ("core_tasks",)
    """The run records the labels `core_tasks` picked (not the patterns as written), and only for a subset."""

    core_bundle: Path | None = None
    """DCLM CORE bundle dir; null = <base_dir>/eval_bundle."""
    core_tasks: Annotated[tuple[CoreTaskPattern, ...], Field(max_length=10_000)] | None = None
    """CORE tasks to run, lm-eval style: labels of the bundle's core.yaml or globs (`arc_*`); null = all of them.
    A subset is reported as "CORE (k of N tasks)" and is not comparable with the full CORE (`rlab eval --tasks`)."""
    max_per_task: PositiveInt | None = None
    """Evaluate at most N examples per CORE task (deterministic subsample); null = all."""

    @field_validator("core_tasks")
    @classmethod
    def _some_tasks(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("name at least one task, or leave it null for all of them")
        return value
