"""One run per tag at a time: an exclusive `flock` on a small file per tag in the base dir.

`rlab continue` takes the locks of every tag it trains before it clones anything and holds
them until its jobs end, and a job ends only once none of its processes is left
(`rlab.orchestrate.launch`). Each job's torchrun inherits its tag's lock (its file descriptor), so
the lock outlives rlab while the launcher runs; torchrun does not pass it on to its workers, so
they carry the lock file's path in their environment (``RLAB_TAG_LOCK``) instead, and a tag
counts as taken while any process carrying it is alive, with or without the flock. A second
`continue`/`--resume` on a taken tag is refused with the holder's PID. The kernel drops a lock
when the last process holding it exits, so a crash never leaves a stale lock behind (the file
stays; its content only names the last holder).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterable

from rlab.errors import LaunchError
from rlab.orchestrate.job_processes import TAG_LOCK_ENV, job_processes
from rlab.paths import BaseLayout


def _holder_text(path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text or "an unknown process"


def leftover_text(base: BaseLayout, tag: str) -> str | None:
    """``3 processes of an earlier run (PIDs ...)`` still alive on `tag` without its lock, or None."""
    pids = sorted(p.pid for p in job_processes(TAG_LOCK_ENV, str(base.tag_lock(tag))))
    if not pids:
        return None
    return f"{len(pids)} process(es) of an earlier run still alive (PIDs {', '.join(map(str, pids))})"


def lock_holder(base: BaseLayout, tag: str) -> str | None:
    """Who holds `tag` (``PID 123 on host since ...``, or the processes of a run still alive), None when free."""
    path = base.tag_lock(tag)
    if not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder_text(path)
    finally:
        os.close(fd)
    return leftover_text(base, tag)


class TagLocks:
    """The held locks of a set of tags; `fd(tag)` is what that tag's job inherits."""

    def __init__(self, base: BaseLayout, tags: Iterable[str]) -> None:
        self.base = base
        self.tags = list(tags)
        self._fds: dict[str, int] = {}

    def __enter__(self) -> TagLocks:
        self.base.checkpoints_root.mkdir(parents=True, exist_ok=True)
        try:
            for tag in self.tags:
                self._take(tag)
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _take(self, tag: str) -> None:
        path = self.base.tag_lock(tag)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LaunchError(
                f"Tag '{tag}' is being trained by another rlab ({_holder_text(path)}).",
                "Wait for it to finish or stop that process; two runs on one tag would write the "
                "same checkpoints.",
            ) from None
        leftover = leftover_text(self.base, tag)
        if leftover is not None:
            os.close(fd)
            raise LaunchError(
                f"Tag '{tag}' is still being written: {leftover}.",
                "They stop within seconds of their launcher's death; if they do not, stop them (kill PID). "
                "Two runs on one tag would write the same checkpoints.",
            )
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        os.write(fd, f"PID {os.getpid()} on {socket.gethostname()} since {stamp} UTC\n".encode())
        self._fds[tag] = fd

    def fd(self, tag: str) -> int | None:
        return self._fds.get(tag)

    def env(self, tag: str) -> dict[str, str]:
        """What `tag`'s job carries in its environment so that its workers count as holding the tag."""
        return {TAG_LOCK_ENV: str(self.base.tag_lock(tag))}

    def release(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
