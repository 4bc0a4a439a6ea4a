"""The one entry point of rlab's torchrun workers (`python -m rlab.core.train`, `python -m rlab.evals`).

Both read one resolved-config JSON and declare no flags. Each dies with the process that launched it
(`die_with_launcher`: torchrun's agent, or rlab for a single-process eval), so no worker outlives its
launcher, whatever killed it. Errors are rendered the same way for both:
an `RlabError`, or a filesystem error (full disk, read-only folder, named as `rlab.errors.os_error` names it), is
one `error: <message> <hint>` line on stderr and exit code 1 (with `RLAB_DEBUG=1` the traceback instead), and, when the launcher set `RLAB_ERROR_FILE`, the message and hint are also written
there as JSON so that the CLI can show them as its own error instead of torchrun's failure report.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rlab.atomic_io import write_text_atomic
from rlab.errors import RlabError, os_error
from rlab.orchestrate.lifeline import LAUNCHER_ENV, die_with_parent

if TYPE_CHECKING:
    from rlab.errors import RlabError

ERROR_FILE_ENV = "RLAB_ERROR_FILE"


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is at emit time, so rich's progress bar can print log lines above itself."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def configure_logging() -> None:
    """INFO on rank 0, WARNING elsewhere; every line says its rank."""
    rank = int(os.environ.get("RANK", "0"))
    handler = _CurrentStderrHandler()
    handler.setFormatter(logging.Formatter(f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, handlers=[handler], force=True)


def write_error_file(path: Path, message: str, hint: str | None) -> None:

    write_text_atomic(Path(path), json.dumps({"message": message, "hint": hint}) + "\n")


def read_error_file(path: Path) -> tuple[str, str | None] | None:
    """(message, hint) a worker left in its error file, or None."""

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return str(data["message"]), data.get("hint")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def die_with_launcher() -> bool:
    """SIGKILL this worker when its parent dies (Linux PR_SET_PDEATHSIG); False when the launcher is gone already.

    Under torchrun the parent is the elastic agent, whose pid `rlab.orchestrate.lifeline` put into
    RLAB_LAUNCHER_PID: a parent other than that means the agent died before the signal was armed. A
    checkpoint being written when the signal comes is never half-written (`rlab.atomic_io`).
    """

    launcher = os.environ.get(LAUNCHER_ENV)
    parent = os.getppid()
    if launcher and launcher.isdigit() and int(launcher) != os.getpid():
        parent = int(launcher)  # started by the launched command (torchrun), not exec'd as it
    return die_with_parent(parent, signal.SIGKILL)


def run_worker(argv: list[str], usage: str, job: Callable[[Path], object]) -> int:
    """Run `job(config_path)`; returns the process exit code (0, 1 for a user error, 2 for usage)."""

    if not die_with_launcher():
        sys.stderr.write("error: the launcher of this worker has exited; not starting.\n")
        return 1
    configure_logging()
    if len(argv) != 1:
        sys.stderr.write(f"usage: {usage}\n")
        return 2
    try:
        job(Path(argv[0]))
    except RlabError as exc:
        if os.environ.get("RLAB_DEBUG"):
            raise
        return _report(exc)
    except OSError as exc:
        if os.environ.get("RLAB_DEBUG") or not is_file_error(exc):
            raise
        return _report(os_error(exc))  # a full disk, a read-only folder: one line naming the path
    return 0


def is_file_error(exc: OSError) -> bool:
    """A filesystem error the user can act on (names a file, or a full disk), not a peer's dropped connection."""

    return exc.filename is not None or exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def _report(exc: RlabError) -> int:
    """One `error: <message> <hint>` line on stderr (and the error file); returns exit code 1."""
    line = exc.message.replace("\n", " ") + (f" {exc.hint}" if exc.hint else "")
    sys.stderr.write(f"error: {line}\n")
    error_file = os.environ.get(ERROR_FILE_ENV)
    if error_file and not Path(error_file).exists():  # the first rank's reason; a peer's echo comes later
        try:
            write_error_file(Path(error_file), exc.message, exc.hint)
        except OSError:  # the disk that failed the job may hold the error file too: the line above stays
            pass
    return 1
