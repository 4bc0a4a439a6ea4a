"""Atomic file writes: a crash never leaves a file that looks complete but is not.

Every writer in rlab (checkpoints, eval outputs, results.csv, plots, run configs) goes through
here: write to a unique hidden temp file in the destination folder, flush, fsync, rename over
the destination (atomic on one filesystem), then fsync the folder so the rename itself is
durable. Readers therefore see either the old file or the new one, never a torn one. A failed
write removes its temp file and leaves the old file untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

FILE_MODE = 0o644
"""mkstemp creates 0600; results and checkpoints are meant to be shared like any written file."""


def fsync_dir(directory: Path) -> None:
    """Make a rename inside `directory` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(
    path: Path, write: Callable[[IO[Any]], object], *, binary: bool = True, size: int | None = None
) -> None:
    """Create/replace `path` with what `write(fh)` writes, atomically.

    An OSError (a full disk, a read-only folder) names `path` even where the OS names no file, and
    carries `bytes_needed` (`size`, when known), so the CLI can say what failed where.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # TEMP_GLOB
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        error = OSError(exc.errno, exc.strerror, exc.filename if exc.filename and tmp is None else str(path))
        error.bytes_needed = size  # type: ignore[attr-defined]
        raise error from exc
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


TEMP_GLOB = ".*.tmp"
"""What `atomic_write`'s temp files look like (a writer killed mid-write leaves one behind)."""


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the temp files a killed writer left in `folder` (call only while no writer can be active there, e.g.
    under the tag's lock before a resume); returns what was removed."""
    folder = Path(folder)
    stale = sorted(folder.glob(TEMP_GLOB)) if folder.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Create/replace `path` with `data`, atomically."""
    atomic_write(path, lambda fh: fh.write(data), size=len(data))


def write_text_atomic(path: Path, text: str) -> None:
    """Create/replace `path` with UTF-8 `text`, atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))
