"""How the verdicts of two results.csv differ, arm by arm: does a rerun reproduce a report's findings?

A rerun of one experiment under other numerics (another CPU, dtype or thread count) gives other digits; what it
should reproduce are the verdicts, above all those that say better or worse (`docs/reproducibility.md`). The
verdict columns are the report's `<metric>_verdict_vs_<baseline>` (`rlab.report.assemble.wide`); the tags of one arm
(its seeds) repeat the arm's verdicts, so cells are keyed by (arm, column). `experiments/probes/repro.py` counts
the changes between a demo and its rerun; `rlab compare` says them for two experiments with the same arms.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from rlab.records.base import ContractError, first_error
from rlab.records.results_row import ResultsRow
from rlab.report.stats.verdicts import Verdict

VERDICT_MARK = "_verdict_vs_"


@dataclass(frozen=True)
class VerdictChange:
    arm: str
    column: str
    before: Verdict
    after: Verdict

    @property
    def directional(self) -> bool:
        """A better/worse verdict on either side: a finding that a rerun did not reproduce."""
        return self.before.significant or self.after.significant

    def sentence(self) -> str:
        """`pi bpb_len_2048 vs rope: better -> ≈ within noise`."""
        metric, _, reference = self.column.partition(VERDICT_MARK)
        return f"{self.arm} {metric} vs {reference}: {self.before} -> {self.after}"


@dataclass(frozen=True)
class VerdictDiff:
    compared: int
    """Verdicts (arm x column) both files have."""
    changes: tuple[VerdictChange, ...]
    only_one: int
    """Verdicts only one file has (an arm or metric the other lacks)."""

    @property
    def directional(self) -> tuple[VerdictChange, ...]:
        return tuple(c for c in self.changes if c.directional)

    def summary(self) -> str:
        """`3 of 142 verdicts changed, 2 of them to or from better/worse`."""
        return (
            f"{len(self.changes)} of {self.compared} verdicts changed, {len(self.directional)} of them to or from "
            "better/worse" + (f" ({self.only_one} in one file only)" if self.only_one else "")
        )


def read_verdicts(path: Path) -> dict[tuple[str, str], Verdict]:
    """(arm, verdict column) -> its verdict, every row read through `ResultsRow`; blank cells are left out."""
    try:
        with Path(path).open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"Cannot read {path} ({type(exc).__name__}).") from None
    out: dict[tuple[str, str], Verdict] = {}
    for raw in rows:
        try:
            row = ResultsRow.model_validate(raw)
            cells = {k: Verdict(v) for k, v in (row.model_extra or {}).items() if VERDICT_MARK in k and v}
        except (ValidationError, ValueError) as exc:
            why = first_error(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ContractError(f"{path}: row {raw.get('tag')!r} breaks its contract ({why}).") from None
        arm = str((row.model_extra or {}).get("arm") or row.tag)
        for column, verdict in cells.items():
            out[(arm, column)] = verdict
    return out


def verdict_diff(before: Path, after: Path) -> VerdictDiff:
    """How `after`'s verdicts differ from `before`'s (two results.csv of experiments with the same arms)."""
    a, b = read_verdicts(before), read_verdicts(after)
    both = sorted(set(a) & set(b))
    changes = tuple(
        VerdictChange(arm, col, a[arm, col], b[arm, col]) for arm, col in both if a[arm, col] != b[arm, col]
    )
    return VerdictDiff(compared=len(both), changes=changes, only_one=len(set(a) ^ set(b)))
