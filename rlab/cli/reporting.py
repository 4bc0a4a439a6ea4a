"""The console reporter: what `rlab continue`, `rlab pretrain` and `rlab eval` show while they run.

`ConsoleReporter(out, err)` renders the events of `rlab.orchestrate.reporter.Reporter` with rich:
results and progress on `out`, diagnostics on `err`. For `--json` a command passes stderr as both, so
stdout carries only its JSON; nothing swaps a module-level console. Text that comes from a worker or a
file is printed as text, never as markup (a `[` in a path or an error message stays as it is).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rlab.cli.console import err, out
from rlab.cli.eval_progress import EvalProgressView
from rlab.orchestrate.reporter import JsonReporter
from rlab.orchestrate.watch import progress_table

if TYPE_CHECKING:
    from rlab.orchestrate.launch import JobState
    from rlab.orchestrate.reporter import JobFailure, Reporter, TickFn
    from rlab.orchestrate.watch import Progress


def _styled(style: str, label: str, text: str) -> Text:
    """`label` in `style`, then `text` verbatim."""
    return Text.assemble((label, style), text)


class ConsoleReporter:
    """Rich rendering of the orchestrated sequences' events."""

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self._view: EvalProgressView | None = None

    @property
    def wants_progress_events(self) -> bool:
        return self.err.is_terminal  # elsewhere (CI, a file) the worker logs every 10% itself

    def _print(self, console: Console, text: str | Text) -> None:
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    def info(self, text: str) -> None:
        self._print(self.out, text)

    def notice(self, text: str) -> None:
        self._print(self.err, text)

    def warning(self, text: str) -> None:
        self._print(self.err, _styled("yellow", "warning: ", text))

    @contextmanager
    def watching(self) -> Iterator[TickFn]:

        with Live(progress_table([], {}), console=self.out, refresh_per_second=2, transient=False) as live:

            def tick(states: list[JobState], progress: dict[str, Progress]) -> None:
                live.update(progress_table(states, progress))

            yield tick

    def jobs_ended(self, states: Sequence[JobState]) -> None:

        self.out.line()
        table = Table(title="Summary", title_justify="left")
        for column in ("variant", "tag", "state", "exit", "time", "log"):
            table.add_column(column)
        for s in states:
            seconds = s.seconds
            table.add_row(
                Text(s.job.variant),
                Text(s.job.tag),
                Text(s.state),
                "-" if s.returncode is None else str(s.returncode),
                "-" if seconds is None else time.strftime("%H:%M:%S", time.gmtime(seconds)),
                Text(str(s.job.log)),
            )
        self.out.print(table)

    def job_failed(self, failure: JobFailure) -> None:
        if failure.reason:
            self._print(
                self.err,
                _styled("red", f"── {failure.tag} failed (exit {failure.returncode}): ", failure.reason),
            )
        self._print(self.err, _styled("red", f"── last lines of {failure.log}:", ""))
        for line in failure.tail:
            self._print(self.err, f"  {line}")

    @contextmanager
    def evaluating(self, tag: str, evals: Sequence[str], out_dir: Path) -> Iterator[None]:

        self._print(self.out, _styled("bold", tag, f": evals {', '.join(evals)} -> {out_dir}"))
        if not self.wants_progress_events:
            yield
            return
        with EvalProgressView(self.err) as view:
            self._view = view
            try:
                yield
            finally:
                self._view = None

    def eval_progress(self, tag: str, name: str, done: int, total: int) -> None:
        if self._view is not None:
            self._view.update(name, done, total)

    def worker_line(self, tag: str, line: str) -> None:
        self._print(self.err, f"  {line}")

    def eval_finished(self, tag: str, summary: str, eval_json: Path) -> None:
        self._print(self.out, _styled("green", f"{tag}: done", f" {summary}"))

    def eval_failed(self, failure: JobFailure) -> None:
        self._print(
            self.err,
            _styled(
                "red", f"{failure.tag}: eval exited with code {failure.returncode}; log: {failure.log}", ""
            ),
        )
        for line in [failure.reason] if failure.reason else failure.tail:
            self._print(self.err, f"  {line}")

    def next_step(self, command: str) -> None:
        self._print(self.out, f"next: {command}")


def console_reporter(to_stderr: bool = False) -> ConsoleReporter:
    """The console reporter; `to_stderr` for --json output, so stdout carries only the JSON."""
    return ConsoleReporter(out=err if to_stderr else out, err=err)


def run_reporter(as_json: bool) -> Reporter:
    """What a training run reports to: the console, or with --json one JSON object per event on stdout."""
    return JsonReporter(emit=typer.echo) if as_json else console_reporter()
