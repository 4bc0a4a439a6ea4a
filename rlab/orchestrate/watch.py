"""Follow running jobs through their metrics.jsonl files and render one progress table.

Each training job appends one JSON object per line to ``runs/<tag>/metrics.jsonl`` (see
docs/architecture.md). `MetricsTail` reads only what was appended since the last poll and
keeps the newest train record; `progress_table` turns every job's state into a rich Table
(the CLI puts it in a `Live` display; nothing here prints).
"""

from __future__ import annotations

import json
import re
import signal
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from rlab.orchestrate.launch import JobState


@dataclass
class Progress:
    """What a job's metrics say so far."""

    step: int | None = None
    start_step: int | None = None
    end_step: int | None = None
    loss: float | None = None
    tokens_per_s: float | None = None
    val_bpb: float | None = None
    eta_s: float | None = None
    finished: str | None = None
    """'done' or 'failed' when the worker wrote its final record."""
    error: str | None = None
    kind: str | None = None
    """A failure's kind beyond failed: `diverged` or `stalled` (metrics_log.FailedRecord)."""


class MetricsTail:
    """Incremental reader of one metrics.jsonl (tolerates a partially written last line)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = 0
        self.buffer = b""
        self.progress = Progress()
        self._first: tuple[float, int] | None = None  # (time, step) of the first train record seen
        self._last: tuple[float, int] | None = None

    def poll(self) -> Progress:
        if self.path is None or not self.path.exists():
            return self.progress
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        self.offset += len(chunk)
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if line.strip():
                try:
                    self._apply(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return self.progress

    def _apply(self, record: dict) -> None:
        p = self.progress
        kind = record.get("type")
        if kind == "train":
            p.step = record.get("step", p.step)
            p.start_step = record.get("start_step", p.start_step)
            p.end_step = record.get("end_step", p.end_step)
            p.loss = record.get("loss", p.loss)
            p.tokens_per_s = record.get("tokens_per_s", p.tokens_per_s)
            now = record.get("time")
            if isinstance(now, (int, float)) and isinstance(p.step, int):
                if self._first is None:
                    self._first = (now, p.step)
                self._last = (now, p.step)
                p.eta_s = self._eta()
        elif kind == "eval":
            p.val_bpb = record.get("val_bpb", p.val_bpb)
        elif kind in ("done", "failed"):
            p.finished = kind
            p.error = record.get("error")
            p.kind = record.get("kind")
            if kind == "done":
                p.eta_s = 0.0
            if record.get("step") is not None:
                p.step = record["step"]

    def _eta(self) -> float | None:
        p = self.progress
        if self._first is None or self._last is None or p.end_step is None:
            return None
        (t0, s0), (t1, s1) = self._first, self._last
        if s1 <= s0 or t1 <= t0:
            return None
        return max(0.0, (p.end_step - s1) * (t1 - t0) / (s1 - s0))


def tail_lines(path: Path, n: int = 15) -> list[str]:
    """The last `n` lines of a log file (empty if it does not exist)."""
    if not path.exists():
        return []
    with open(path, errors="replace") as fh:
        return [line.rstrip("\n") for line in deque(fh, maxlen=n)]


RANK_PREFIX = re.compile(r"^\[[^\]]*\]:\s*")
"""The "[0]:"-style rank prefix torchrun can put in front of a worker's line."""
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt): ")
_PEER_FAILURE = re.compile(
    r"(closed|reset) by peer|Broken pipe|DistBackendError|Connection refused|Socket Timeout|"
    r"communicator was aborted|ProcessGroup\w*.*(abort|[Tt]imeout)",
)
"""A rank's failure that only echoes another rank's: its peer went away (gloo/NCCL)."""


_RANK_FIELD = re.compile(r"^\s*rank\s*:\s*(\d+)")
_EXIT_FIELD = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)")
_TERMINATED_BY_AGENT = re.compile(r"Sending process (\d+) closing signal")


@dataclass(frozen=True)
class RankExit:
    """One rank's end as torchrun's failure report states it."""

    rank: int
    exitcode: int
    root: bool
    """torchrun's "Root Cause (first observed failure)"."""
    by_agent: bool
    """torchrun itself signalled it (it stops the other ranks once one failed)."""

    def describe(self) -> str:
        if self.exitcode < 0:
            return f"rank {self.rank} was killed by {signal_name(-self.exitcode)}"
        return f"rank {self.rank} exited with code {self.exitcode}"


def signal_name(number: int) -> str:
    """`SIGKILL (signal 9)`."""

    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def launcher_signal(returncode: int | None) -> str | None:
    """A job whose launcher (torchrun, exec'd by the lifeline shim) was killed by a signal, in words; else None."""
    if returncode is None or returncode >= 0:
        return None
    return (
        f"the job's launcher (torchrun) was killed by {signal_name(-returncode)}; its workers stopped with it"
    )


def rank_exits(lines: list[str]) -> list[RankExit]:
    """The ranks torchrun's failure report lists (root cause first), from a job log's lines."""
    stopped = {int(m.group(1)) for line in lines if (m := _TERMINATED_BY_AGENT.search(line))}
    exits, rank, root = [], None, False
    for line in lines:
        if "Root Cause" in line:
            root = True
        elif line.startswith("Failures:"):
            root = False
        elif m := _RANK_FIELD.match(line):
            rank = int(m.group(1))
        elif (m := _EXIT_FIELD.match(line)) and rank is not None:
            exits.append(RankExit(rank, int(m.group(1)), root, int(m.group(2)) in stopped))
            rank = None
    return sorted(exits, key=lambda e: not e.root)


def worker_error(path: Path) -> str | None:
    """A failed job's cause, first, as plain text: a worker's own ``error: ...`` line (rlab workers print one for
    every user-facing failure, a full disk included) that is not a peer's disconnect; else a rank torchrun reports
    killed by a signal (not by torchrun itself), the other ranks' disconnects being its echo; else the first
    exception line of a worker traceback that is not a disconnect, then the first disconnect, then the exit code
    of torchrun's root cause. torchrun's ChildFailedError boilerplate is skipped. None when the log has none."""
    if not path.exists():
        return None
    with open(path, errors="replace") as fh:
        lines = [RANK_PREFIX.sub("", raw.rstrip("\n")) for raw in fh]
    own, own_peer, exception, peer = None, None, None, None
    for raw in lines:
        line = raw.strip()
        if line.startswith("error: "):
            text = line[len("error: ") :]
            if _PEER_FAILURE.search(text):
                own_peer = own_peer or text
            else:
                own = own or text
        elif _EXCEPTION_LINE.match(line) and "ChildFailedError" not in line:
            if _PEER_FAILURE.search(line):
                peer = peer or line
            else:
                exception = exception or line
    exits = rank_exits(lines)
    killed = next((e for e in exits if e.exitcode < 0 and not e.by_agent), None)
    if own is not None:
        return own
    if killed is not None:
        echo = " (the other ranks then lost their connection to it)" if own_peer or peer else ""
        return killed.describe() + echo
    root = exits[0].describe() if exits and exits[0].root else None
    return exception or own_peer or peer or root


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


_STATE_STYLE = {
    "pending": "dim",
    "running": "cyan",
    "done": "green",
    "failed": "red",
    "interrupted": "yellow",
    "submitted": "cyan",
}


def progress_table(states: list[JobState], progress: dict[str, Progress], title: str | None = None) -> Table:
    """One row per job: variant, tag, step/total, loss, tokens/s, val BPB, ETA, state."""
    table = Table(title=title, title_justify="left")
    for column in ("variant", "tag", "step", "loss", "tok/s", "val bpb", "ETA", "state"):
        table.add_column(column, justify="right" if column not in ("variant", "tag", "state") else "left")
    for state in states:
        p = progress.get(state.job.tag, Progress())
        step = (
            "-" if p.step is None else (f"{p.step}/{p.end_step}" if p.end_step is not None else str(p.step))
        )
        style = _STATE_STYLE.get(state.state, "")
        label = state.state if state.returncode in (None, 0) else f"{state.state} ({state.returncode})"
        table.add_row(
            state.job.variant,
            state.job.tag,
            step,
            "-" if p.loss is None else f"{p.loss:.4f}",
            "-" if p.tokens_per_s is None else f"{p.tokens_per_s:,.0f}",
            "-" if p.val_bpb is None else f"{p.val_bpb:.4f}",
            format_eta(p.eta_s) if state.state == "running" else "-",
            f"[{style}]{label}[/]" if style else label,
        )
    return table
