"""The one exception family that library code raises for a user's mistake.

Library code never prints and never exits: it raises an `RlabError` carrying a message
(what went wrong, with the offending value) and a hint (what to do next). Only
`rlab.cli.app.main` renders it, without a traceback unless `RLAB_DEBUG=1`.
"""

from __future__ import annotations

import difflib
import errno
import shutil
from collections.abc import Iterable
from pathlib import Path


class RlabError(Exception):
    """A user-facing error: `message` says what is wrong, `hint` what to do about it."""

    exit_code: int = 1
    """What `rlab` exits with when this error ends a command."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n{self.hint}"


class SpecError(RlabError):
    """An experiment spec or run config is invalid."""


class CheckpointError(RlabError):
    """A checkpoint is missing, incomplete, or does not fit the model."""


class DataError(RlabError):
    """A corpus, shard or tokenizer is missing or malformed."""


class TrainingError(RlabError):
    """Training cannot go on (e.g. too many non-finite steps in a row)."""

    failure_kind: str | None = None
    """How the run ended when not plainly `failed` (metrics.jsonl's failed record, `rlab ls`'s state)."""


class Diverged(TrainingError):
    """The loss stopped changing or passed its bound for too many steps: the arm is dead, not done."""

    failure_kind = "diverged"


class LaunchError(RlabError):
    """A job could not be launched or failed."""


class EvalError(RlabError):
    """An evaluation cannot run (missing bundle, malformed task file, ...)."""


class ExportError(RlabError):
    """A checkpoint cannot be exported (a RoPE the target cannot express, a round trip that does not match)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be (the CLI installs the handler), so the same clean-up runs."""


SIGINT_EXIT = 130
"""128 + SIGINT: the shell's exit status of a command stopped by Ctrl-C."""
SIGTERM_EXIT = 143
"""128 + SIGTERM."""


def interrupt_exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM (a `Terminated`, also as the cause of click's Abort)."""
    terminated = isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated)
    return SIGTERM_EXIT if terminated else SIGINT_EXIT


class Interrupted(RlabError):
    """A run stopped by Ctrl-C or SIGTERM after its jobs were stopped; exits 130 or 143, as the signal says."""

    def __init__(self, message: str, hint: str | None = None, *, cause: BaseException | None = None) -> None:
        super().__init__(message, hint)
        self.exit_code = interrupt_exit_code(cause) if cause is not None else SIGINT_EXIT


def unknown_name_error(
    kind: str, name: str, available: Iterable[str], cls: type[RlabError] = RlabError
) -> RlabError:
    """`Unknown RoPE variant 'yarm'. Did you mean 'yarn'? Available: ...` as an error object."""
    names = sorted(available)
    by_lower = {n.lower(): n for n in names}
    close = [by_lower[m] for m in difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.5)]
    did_you_mean = f" Did you mean '{close[0]}'?" if close else ""
    return cls(f"Unknown {kind} '{name}'.{did_you_mean} Available: {', '.join(names)}.")


def os_error(exc: OSError) -> RlabError:
    """An OSError that escaped a command (full disk, read-only or missing folder) as a user-facing error.

    The message names the path the OS names; for a full disk it adds how much space is left on the filesystem that
    holds it (none is guessed when the OS names no file: the working directory's disk may not be the full one).
    """

    path = exc.filename or "a file (the OS named none)"
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        free = ""
        for folder in (
            (Path(str(exc.filename)).parent, *Path(str(exc.filename)).parents) if exc.filename else ()
        ):
            try:
                free = f" ({_size(shutil.disk_usage(folder).free)} free there)"
                break
            except OSError:
                continue
        needed = getattr(exc, "bytes_needed", None)
        if needed:
            free = f" ({_size(needed)} to write{', ' + free.strip(' ()') if free else ''})"
        return RlabError(
            f"No space left writing {path}{free}.",
            "Free some space on that filesystem (or point --results-dir/--base-dir elsewhere) "
            "and rerun; files already written are complete (writes are atomic).",
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return RlabError(
            f"Cannot write {path}: {reason}.",
            "Choose a writable folder (--results-dir, --base-dir, or $RLAB_RESULTS_DIR).",
        )
    return RlabError(f"{reason}: {path}.", "Check the path and its permissions.")


def _size(n_bytes: int) -> str:
    n = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
