"""One run per tag: the flock'd tag lock, refused with the holder's PID, inherited by the job it launches."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlab.errors import LaunchError
from rlab.orchestrate.lock import TagLocks, lock_holder
from rlab.paths import BaseLayout


def test_a_second_lock_on_a_tag_is_refused_with_the_pid(tmp_path):
    base = BaseLayout(tmp_path)
    assert lock_holder(base, "d20-pi") is None
    with TagLocks(base, ["d20-pi", "d20-yarn"]):
        assert f"PID {os.getpid()}" in (lock_holder(base, "d20-pi") or "")
        with pytest.raises(
            LaunchError, match=rf"Tag 'd20-yarn' is being trained by another rlab \(PID {os.getpid()}"
        ):
            TagLocks(base, ["d20-ntk", "d20-yarn"]).__enter__()
        assert lock_holder(base, "d20-ntk") is None  # a refused set takes none of its locks
    assert lock_holder(base, "d20-pi") is None and lock_holder(base, "d20-yarn") is None
    assert [
        p.name for p in base.checkpoints_root.iterdir() if not p.name.startswith(".")
    ] == []  # no tag folders


def test_the_lock_lives_as_long_as_the_job_that_inherited_it(tmp_path):
    base = BaseLayout(tmp_path)
    with TagLocks(base, ["d20-pi"]) as locks:
        fd = locks.fd("d20-pi")
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, pass_fds=(fd,)
        )
    try:
        assert lock_holder(base, "d20-pi") is not None  # rlab let go; the job still holds it
    finally:
        child.communicate(b"", timeout=30)
    assert lock_holder(base, "d20-pi") is None
