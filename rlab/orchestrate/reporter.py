"""How the orchestrated sequences say what is happening: a small `Reporter` that the caller picks.

`rlab.orchestrate.training` (clone -> lock -> launch -> watch) and `rlab.orchestrate.evaluation`
(resolve -> run -> summarise) never print; they tell their reporter. Three kinds exist:

* the console one, `rlab.cli.reporting.ConsoleReporter` (only the CLI owns a rich Console);
* `JsonReporter`: one JSON object per event, handed to a sink (`rlab continue --json`: JSON lines on
  stdout, for scripts that follow a run); it also keeps them in `events`;
* `SilentReporter`: drops everything (library callers, tests).

Every text a reporter gets from a worker or a file (`worker_line`, `JobFailure.reason` and `.tail`) is
plain text: a console reporter must print it as text, never as markup.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rlab.orchestrate.launch import JobState
    from rlab.orchestrate.watch import Progress

TickFn = Callable[[list["JobState"], dict[str, "Progress"]], None]
"""Called on every poll of running jobs with their states and what their metrics say so far."""


@dataclass(frozen=True)
class JobFailure:
    """Why one job did not finish: its own reason (the first rank's error line) and the end of its log."""

    tag: str
    returncode: int | None
    log: Path
    reason: str | None
    tail: list[str] = field(default_factory=list)


class Reporter(Protocol):
    """What the sequences report; each method is one kind of event."""

    @property
    def wants_progress_events(self) -> bool:
        """Whether an eval worker should send progress events (to draw a bar) instead of logging every 10%."""
        ...

    def info(self, text: str) -> None:
        """A line for people about what happens now (what was cloned, what is launched)."""

    def notice(self, text: str) -> None:
        """A diagnostic line (not a result): what a base is, what --force deletes."""

    def warning(self, text: str) -> None:
        """Something the user should know that does not stop the run."""

    def watching(self) -> AbstractContextManager[TickFn]:
        """While training jobs run: yields the function each poll calls with their states and progress."""
        ...

    def jobs_ended(self, states: Sequence[JobState]) -> None:
        """Every job's final state (also after an interrupt)."""

    def job_failed(self, failure: JobFailure) -> None:
        """One failed job's reason and log tail."""

    def evaluating(self, tag: str, evals: Sequence[str], out_dir: Path) -> AbstractContextManager[None]:
        """While one tag's eval worker runs."""
        ...

    def eval_progress(self, tag: str, name: str, done: int, total: int) -> None:
        """A progress event of the running eval."""

    def worker_line(self, tag: str, line: str) -> None:
        """One line of a worker's own output (plain text)."""

    def eval_finished(self, tag: str, summary: str, eval_json: Path) -> None:
        """One tag's eval finished; `summary` holds its headline numbers."""

    def eval_failed(self, failure: JobFailure) -> None:
        """One tag's eval failed without a reason of the worker's own (that one is raised instead)."""

    def next_step(self, command: str) -> None:
        """The command to run next."""


class SilentReporter:
    """Reports nothing."""

    wants_progress_events = False

    def info(self, text: str) -> None:
        pass

    def notice(self, text: str) -> None:
        pass

    def warning(self, text: str) -> None:
        pass

    @contextmanager
    def watching(self) -> Iterator[TickFn]:
        yield lambda states, progress: None

    def jobs_ended(self, states: Sequence[JobState]) -> None:
        pass

    def job_failed(self, failure: JobFailure) -> None:
        pass

    @contextmanager
    def evaluating(self, tag: str, evals: Sequence[str], out_dir: Path) -> Iterator[None]:
        yield

    def eval_progress(self, tag: str, name: str, done: int, total: int) -> None:
        pass

    def worker_line(self, tag: str, line: str) -> None:
        pass

    def eval_finished(self, tag: str, summary: str, eval_json: Path) -> None:
        pass

    def eval_failed(self, failure: JobFailure) -> None:
        pass

    def next_step(self, command: str) -> None:
        pass


def job_state_json(state: JobState) -> dict[str, Any]:
    """One job's final state as JSON (tag, variant, state, exit code, seconds, log)."""
    return {
        "tag": state.job.tag,
        "variant": state.job.variant,
        "state": state.state,
        "exit": state.returncode,
        "seconds": None if state.seconds is None else round(state.seconds, 1),
        "log": str(state.job.log),
    }


class JsonReporter(SilentReporter):
    """Each event as one JSON object (``{"event": name, ...}``), kept in `events` and handed to `emit`.

    Progress is reported when a job's step or state changes, not on every poll; eval progress events
    and worker lines are left out, as the silent reporter leaves them (eval.log and train.log keep the worker's
    output).
    """

    def __init__(self, emit: Callable[[str], None] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self._emit = emit
        self._seen: dict[str, tuple[Any, ...]] = {}

    def _event(self, name: str, **fields: Any) -> None:
        record = {"event": name, **fields}
        self.events.append(record)
        if self._emit is not None:
            self._emit(json.dumps(record, default=str))

    def info(self, text: str) -> None:
        self._event("info", text=text)

    def notice(self, text: str) -> None:
        self._event("notice", text=text)

    def warning(self, text: str) -> None:
        self._event("warning", text=text)

    @contextmanager
    def watching(self) -> Iterator[TickFn]:
        def tick(states: list[JobState], progress: dict[str, Progress]) -> None:
            for state in states:
                p = progress.get(state.job.tag)
                key = (state.state, None if p is None else p.step)
                if self._seen.get(state.job.tag) != key:
                    self._seen[state.job.tag] = key
                    self._event(
                        "progress",
                        tag=state.job.tag,
                        state=state.state,
                        step=None if p is None else p.step,
                        end_step=None if p is None else p.end_step,
                        loss=None if p is None else p.loss,
                    )

        yield tick

    def jobs_ended(self, states: Sequence[JobState]) -> None:
        self._event("summary", jobs=[job_state_json(s) for s in states])

    def job_failed(self, failure: JobFailure) -> None:
        self._failure("failed", failure)

    def _failure(self, name: str, failure: JobFailure) -> None:
        self._event(
            name,
            tag=failure.tag,
            exit=failure.returncode,
            reason=failure.reason,
            log=str(failure.log),
            tail=failure.tail,
        )

    @contextmanager
    def evaluating(self, tag: str, evals: Sequence[str], out_dir: Path) -> Iterator[None]:
        self._event("eval_started", tag=tag, evals=list(evals), out_dir=str(out_dir))
        yield

    def eval_finished(self, tag: str, summary: str, eval_json: Path) -> None:
        self._event("eval_done", tag=tag, summary=summary, eval_json=str(eval_json))

    def eval_failed(self, failure: JobFailure) -> None:
        self._failure("eval_failed", failure)

    def next_step(self, command: str) -> None:
        self._event("next", command=command)
