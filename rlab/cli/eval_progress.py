"""The eval worker's progress as a bar in `rlab eval`'s terminal.

The worker's stderr is a pipe (its lines are teed to eval.log), so it cannot draw a bar itself: when the
CLI's stderr is a terminal, `rlab eval` starts it with RLAB_PROGRESS=events and draws the
`rlab-progress {...}` lines it prints (`rlab.evals.progress`) as one bar per eval, printing every other
line above the bar. Event lines are kept out of eval.log. Elsewhere (CI, a file) the worker logs a line
at every 10% instead, which reaches both the terminal and the log.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from rlab.evals.progress import new_bar


class EvalProgressView(AbstractContextManager):
    """Draws the progress events of `rlab.orchestrate.evaluation.run_one` on `console` (a terminal)."""

    def __init__(self, console: Any) -> None:
        self.bar = new_bar(console)
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> EvalProgressView:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def update(self, name: str, done: int, total: int) -> None:
        """Move eval `name`'s bar to `done` of `total` (a bar per eval, added at its first event)."""
        if name not in self._tasks:
            self._tasks[name] = self.bar.add_task(name, total=total)
        self.bar.update(self._tasks[name], completed=done, total=total)
