"""Run a command that dies with rlab: ``python -m rlab.orchestrate.lifeline PARENT_PID -- CMD ARGS...``.

Jobs run in their own session (so Ctrl-C reaches rlab, which stops them in order), which also
means a SIGKILL of rlab's process group never reaches them. This shim asks Linux to send the
command SIGTERM when its parent (rlab) dies (PR_SET_PDEATHSIG survives exec), then execs it.
torchrun answers SIGTERM by stopping its workers, so killing rlab by any signal leaves nothing
running. Elsewhere than Linux it just execs the command.

It also puts its own pid, which the command keeps across exec, into ``RLAB_LAUNCHER_PID``: a worker
torchrun starts is that process's child and dies with it (`rlab.worker.die_with_launcher`), so a
SIGKILLed torchrun (the OOM killer's choice) leaves no worker training on.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1
LAUNCHER_ENV = "RLAB_LAUNCHER_PID"
"""The pid of the launched command (torchrun), set by this shim; its workers' expected parent."""


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> bool:
    """Arrange for `sig` when the parent exits; False when the parent is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes  # noqa: PLC0415 - optional dependency (ctypes)

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    return os.getppid() == parent_pid


def lifeline_argv(argv: Sequence[str]) -> list[str]:
    """`argv` wrapped so that it dies with the calling process."""
    return [sys.executable, "-m", "rlab.orchestrate.lifeline", str(os.getpid()), "--", *argv]


def main(args: list[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: python -m rlab.orchestrate.lifeline PARENT_PID -- CMD [ARGS...]")
    if not die_with_parent(int(args[0])):
        sys.exit(1)  # rlab died before we started: do not start an orphan
    cmd = args[2:]
    os.environ[LAUNCHER_ENV] = str(os.getpid())  # exec keeps the pid: this is the launcher's
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        sys.exit(f"error: cannot start {cmd[0]}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
