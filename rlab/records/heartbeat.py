"""heartbeats/rank<r>.json: each training rank's last step and when it was alive, and the stall rule over them.

A rank writes its heartbeat every few seconds from a thread (`rlab.core.heartbeat`): a frozen or dead process
stops writing, a live one stuck in a collective keeps writing but its step stops moving. `find_stall` is the one
rule both rlab's watchdog (`rlab.orchestrate.launch.run_jobs`) and `rlab status` apply.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from rlab.records.base import Record


class Heartbeat(Record):
    rank: int
    pid: int
    step: int
    """The last step this rank finished (the run's start step before its first)."""
    step_time: float
    """When it finished that step (when the rank started, before its first)."""
    slowest_s: float
    """The longest gap so far between the loop's signs of life (a step, an eval, a save; the first gap, setup and
    compile, excepted); 0 before two."""
    stall_timeout_s: float
    """train.stall_timeout_s: how long past the slowest step a rank may stay silent."""
    time: float
    """When this heartbeat was written."""


@dataclass(frozen=True)
class Stall:
    rank: int
    step: int
    since: float
    """When the rank was last heard from (frozen), or last finished a step (stuck)."""
    bound_s: float
    frozen: bool
    """The rank stopped writing (a frozen or dead process), rather than stopped stepping."""

    def describe(self) -> str:
        """`stalled since 09:41 (rank 1 at step 40)`: what `rlab status` and the job's failure say."""
        return f"stalled since {time.strftime('%H:%M', time.localtime(self.since))} (rank {self.rank} at step {self.step})"

    def detail(self, now: float) -> str:
        silent = "silent" if self.frozen else "at the same step"
        return (
            f"{self.describe()}: {silent} for {now - self.since:.0f} s, past the bound of {self.bound_s:.0f} s "
            "(train.stall_timeout_s + the slowest step seen)"
        )


def read_heartbeats(folder: Path) -> list[Heartbeat]:
    """Every rank's heartbeat that reads (one being replaced or torn is skipped until the next poll)."""
    beats = []
    for path in sorted(Path(folder).glob("rank*.json")) if Path(folder).is_dir() else []:
        try:
            beats.append(Heartbeat.model_validate_json(path.read_bytes()))
        except (OSError, ValidationError):
            continue
    return beats


def find_stall(beats: list[Heartbeat], now: float) -> Stall | None:
    """The rank that stalled, or None: first a rank silent past the bound (stall_timeout_s + the slowest step any
    rank has seen), the longest-silent first; else, once a step was timed, every rank past the bound without a
    finished step: the one furthest behind."""
    if not beats:
        return None
    bound = max(b.stall_timeout_s for b in beats) + max(b.slowest_s for b in beats)
    silent = [b for b in beats if now - b.time > bound]
    if silent:
        b = min(silent, key=lambda b: b.time)
        return Stall(b.rank, b.step, b.time, bound, frozen=True)
    if any(b.slowest_s > 0 for b in beats) and all(now - b.step_time > bound for b in beats):
        b = min(beats, key=lambda b: (b.step, b.step_time))
        return Stall(b.rank, b.step, b.step_time, bound, frozen=False)
    return None
