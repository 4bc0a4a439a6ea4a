"""Every process of a job, found and stopped wherever it went: marked by environment, read from /proc.

torchrun starts each worker in its own session, so a process group or a parent link says nothing
once the launcher is gone (a SIGKILLed agent's workers are re-parented to init). What every process
of a job does keep is its environment: `run_jobs` gives each job a unique ``RLAB_JOB_ID`` (and a
training job ``RLAB_TAG_LOCK``, its tag's lock file), which torchrun passes on to its workers.
`job_processes` finds them by reading ``/proc/<pid>/environ`` (this user's processes), and
`stop_processes` kills them and waits until none is left, so a tag's lock is released only once no
process of its job remains. Elsewhere than Linux nothing is found (the process groups still are killed).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

JOB_ENV = "RLAB_JOB_ID"
"""Unique per launched job; every process of the job carries it."""
TAG_LOCK_ENV = "RLAB_TAG_LOCK"
"""A training job's tag lock file: its processes count as holding the tag while any is alive."""
PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessId:
    """A process as /proc names it: pid plus start time (so a reused pid is never mistaken for it)."""

    pid: int
    started: int


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a process, None when it is gone."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[19])


def is_alive(proc: ProcessId) -> bool:
    """Whether the process still runs (a zombie has finished: only its exit status is left)."""
    stat = _stat(proc.pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[1] == proc.started


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:  # gone, or another user's
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def job_processes(name: str, value: str) -> list[ProcessId]:
    """Live processes whose environment has ``name=value`` (this process excluded)."""
    if not PROC.is_dir():
        return []
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if _environ(pid).get(name) != value:
            continue
        stat = _stat(pid)
        if stat is not None and stat[0] not in ("Z", "X"):
            found.append(ProcessId(pid, stat[1]))
    return found


def stop_processes(
    procs: list[ProcessId], sig: int = signal.SIGKILL, wait_s: float = 30.0
) -> list[ProcessId]:
    """Send `sig` to each process still alive and wait up to `wait_s` until none is; returns the survivors."""
    for proc in procs:
        if is_alive(proc):
            try:
                os.kill(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + wait_s
    left = [p for p in procs if is_alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if is_alive(p)]
    if left:
        log.warning("processes %s did not exit after signal %d", [p.pid for p in left], sig)
    return left


def stop_job(job_id: str, wait_s: float = 30.0) -> list[ProcessId]:
    """Kill every process still carrying `job_id` (workers a dead launcher left behind) and wait for them.

    Returns the survivors (none unless a process ignores SIGKILL, e.g. stuck in the kernel).
    """
    left = job_processes(JOB_ENV, job_id)
    if left:
        log.info("stopping %d process(es) left by job %s: %s", len(left), job_id, [p.pid for p in left])
    return stop_processes(left, signal.SIGKILL, wait_s)
