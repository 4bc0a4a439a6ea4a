"""CORE's files: its eval.json section (`CoreMetric`), core_examples.csv (`CoreExample`) and the experiment's
results_<variant>.csv (`CoreTaskRow`, per task)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from rlab.records.base import Record
from rlab.records.sections import Section


class CoreTask(Record):
    accuracy: float
    centered: float
    baseline: float
    """Random-guess accuracy as a fraction in [0, 1)."""
    n: int
    type: str


class CoreMetric(Section):
    core: float | None
    partial: bool
    missing_tasks: list[str] = Field(default_factory=list)
    tasks: dict[str, CoreTask]
    selection: list[str] | None = None
    """The tasks `eval.core_tasks` picked when it picked a subset of the bundle (then this is not the full CORE,
    and the report says "CORE (k of N tasks)"); None = every task of the bundle."""
    bundle_tasks: int | None = None
    """Tasks in the bundle's core.yaml (the N of "k of N")."""

    @property
    def label(self) -> str:
        """`CORE`, or `CORE (k of N tasks)` for a subset, which must never read as the full CORE."""
        if self.selection is None:
            return "CORE"
        return f"CORE ({len(self.selection)} of {self.bundle_tasks or '?'} tasks)"

    @field_validator("tasks")
    @classmethod
    def _baselines_are_fractions(cls, tasks: dict[str, CoreTask]) -> dict[str, CoreTask]:
        bad = [k for k, t in tasks.items() if not 0.0 <= t.baseline < 1.0]
        if bad:
            raise ValueError(f"baseline must be a fraction in [0, 1) (tasks: {', '.join(bad)})")
        return tasks

    def headline(self) -> str | None:
        return f"{self.label} {self.core:.4f}" if self.core is not None else None

    def card_lines(self) -> list[str]:
        return [f"- {self.label}: {self.core:.4f}"] if self.core is not None else []


class CoreExample(Record):
    columns: ClassVar[tuple[str, ...]] = ("task", "index", "correct")
    task: str
    index: int
    correct: int


class CoreTaskRow(Record):
    columns: ClassVar[tuple[str, ...]] = ("task", "type", "accuracy", "centered", "baseline", "n")
    task: str
    type: str
    accuracy: float
    centered: float
    baseline: float
    n: int
