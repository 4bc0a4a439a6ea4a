"""Progress of the long eval loops: each loop reports (done, total), rank 0 shows it.

An eval loop takes an optional `progress(done, total)` callback and calls it once before its first
forward and after each batch, in its own units of this rank's share (windows, rows, jobs). An adapter
whose eval runs several such loops (train then val, one length after another, one CORE task after
another) maps them onto one scale with `stages`, in a unit that means something to a reader (tokens,
examples, trials), so every eval is one bar whose total is known from its start.

`ProgressDisplay` renders on rank 0 only, in one of four modes (`RLAB_PROGRESS` forces one):

* ``bar``: a rich progress bar on stderr (eval name, bar, done/total, elapsed, ETA) when stderr is a
  terminal; log lines print above it (the worker's logging handler writes to the current sys.stderr);
* ``events``: one ``rlab-progress {json}`` line on stderr per update, at most twice a second: what
  `rlab eval` asks its worker for (the worker's stderr is a pipe), to draw the bar itself;
* ``log``: an INFO line at every further 10% (logs, CI: no control characters);
* ``off``: nothing (ranks other than 0).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]
"""`progress(done, total)`: work done so far out of `total` (this rank's share, the loop's own units)."""

PROGRESS_ENV = "RLAB_PROGRESS"
"""Forces a mode: bar, events, log or off."""
MODES = ("bar", "events", "log", "off")
EVENT_PREFIX = "rlab-progress "
"""Start of an `events` line; the rest is JSON: {"eval": name, "done": int, "total": int}."""
EVENT_INTERVAL_S = 0.5


def report(progress: ProgressFn | None, done: int, total: int) -> None:
    """Call `progress` when there is one (the loops' one-line hook)."""
    if progress is not None:
        progress(done, total)


def stages(progress: ProgressFn | None, sizes: Sequence[int]) -> list[ProgressFn | None]:
    """One callback per consecutive stage of an eval: stage i's (done, total) becomes
    sum(sizes[:i]) + sizes[i] * done / total of sum(sizes) on `progress`."""
    if progress is None:
        return [None] * len(sizes)
    grand = int(sum(sizes))
    out: list[ProgressFn | None] = []
    offset = 0
    for size in sizes:

        def stage(done: int, total: int, offset: int = offset, size: int = int(size)) -> None:
            part = size if total <= 0 else (size * done) // total
            progress(offset + min(part, size), grand)

        out.append(stage)
        offset += int(size)
    return out


def parse_event(line: str) -> tuple[str, int, int] | None:
    """(eval, done, total) of an `events` line, or None for any other line."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        data = json.loads(line[len(EVENT_PREFIX) :])
        return str(data["eval"]), int(data["done"]), int(data["total"])
    except (ValueError, KeyError, TypeError):
        return None


def format_seconds(seconds: float) -> str:
    """h:mm:ss (or m:ss under an hour)."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def new_bar(console: Any) -> Any:
    """A rich Progress: description, bar, done/total, elapsed, ETA (shared with `rlab eval`'s view)."""

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        redirect_stderr=True,
        redirect_stdout=True,
    )


class EvalProgress:
    """The progress callback of one eval: renders (done, total) in its display's mode, keeps the last report."""

    def __init__(self, name: str, display: ProgressDisplay) -> None:
        self.name = name
        self.display = display
        self.done: int | None = None
        self.total: int | None = None
        self._started = display.clock()
        self._last_event = -float("inf")
        self._decile = 0
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        mode = self.display.mode
        if mode == "bar":
            bar = self.display.bar
            if self._task is None:
                self._task = bar.add_task(self.name, total=total)
            bar.update(self._task, completed=done, total=total)
        elif mode == "events":
            now = self.display.clock()
            if done >= total or done == 0 or now - self._last_event >= EVENT_INTERVAL_S:
                self._last_event = now
                sys.stderr.write(
                    EVENT_PREFIX + json.dumps({"eval": self.name, "done": done, "total": total}) + "\n"
                )
                sys.stderr.flush()
        elif mode == "log" and total > 0:
            decile = min(10, (10 * done) // total)
            if decile > self._decile:
                self._decile = decile
                elapsed = self.display.clock() - self._started
                eta = elapsed * (total - done) / done if done else 0.0
                log.info(
                    "%s: %d/%d (%d%%), %s elapsed, ETA %s",
                    self.name,
                    done,
                    total,
                    100 * done // total,
                    format_seconds(elapsed),
                    format_seconds(eta),
                )


class ProgressDisplay(AbstractContextManager):
    """Where the evals of one worker show their progress (see the module docstring for the modes)."""

    def __init__(
        self,
        rank: int = 0,
        *,
        mode: str | None = None,
        console: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = mode or default_mode(rank)
        self.clock = clock
        self.bar: Any = None
        self._console = console
        self.reporters: list[EvalProgress] = []

    def __enter__(self) -> ProgressDisplay:
        if self.mode == "bar":
            self.bar = new_bar(self._console or Console(stderr=True))
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def for_eval(self, name: str) -> EvalProgress:
        reporter = EvalProgress(name, self)
        self.reporters.append(reporter)
        return reporter


def default_mode(rank: int) -> str:
    """off on ranks other than 0; else RLAB_PROGRESS when set; else bar on a terminal, log otherwise."""
    if rank != 0:
        return "off"
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in MODES:
        return forced
    try:
        return "bar" if sys.stderr.isatty() else "log"
    except (AttributeError, ValueError):
        return "log"
