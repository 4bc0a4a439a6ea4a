"""No writer outlives its launcher or its lock: workers die with their launcher, a job's leftovers are found by
their environment and killed, and a tag counts as taken while any process of its job is alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from rlab.errors import LaunchError
from rlab.orchestrate.job_processes import JOB_ENV, TAG_LOCK_ENV, ProcessId, is_alive, job_processes, stop_job
from rlab.orchestrate.lifeline import LAUNCHER_ENV
from rlab.orchestrate.lock import TagLocks, lock_holder
from rlab.paths import BaseLayout

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG")

WORKER = (
    "import sys, time; from rlab.worker import die_with_launcher; "
    "print('armed' if die_with_launcher() else 'refused', flush=True); time.sleep(120)"
)


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    proc = ProcessId(pid, int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]))
    deadline = time.monotonic() + seconds
    while is_alive(proc) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not is_alive(proc)


def _orphan(env: dict[str, str]) -> int:
    """A `sleep` whose parent has exited (re-parented, in its own session): what a dead launcher leaves."""
    out = subprocess.run(
        ["sh", "-c", "sleep 120 >/dev/null 2>&1 & echo $!"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        start_new_session=True,
        check=True,
    )
    return int(out.stdout.strip())


def test_a_worker_dies_with_its_launcher_even_in_its_own_session(tmp_path):
    """torchrun starts each worker in its own session: only the parent-death signal ties it to the agent."""
    launcher_code = (
        "import os, subprocess, sys, time\n"
        f"os.environ[{LAUNCHER_ENV!r}] = str(os.getpid())\n"
        f"child = subprocess.Popen([sys.executable, '-c', {WORKER!r}], start_new_session=True, stdout=sys.stdout)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    launcher = subprocess.Popen([sys.executable, "-c", launcher_code], stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    worker = int(launcher.stdout.readline())
    assert launcher.stdout.readline().strip() == "armed"
    launcher.kill()  # SIGKILL: no chance to stop its children (the OOM killer's way)
    launcher.wait()
    assert _wait_gone(worker, 5.0)


def test_a_worker_whose_launcher_is_already_gone_does_not_start():
    env = {**os.environ, LAUNCHER_ENV: "1"}  # its parent is not pid 1: the launcher it names has gone
    out = subprocess.run(
        [sys.executable, "-c", WORKER.replace("time.sleep(120)", "pass")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "refused"


def test_stop_job_kills_what_carries_the_job_id_wherever_it_was_reparented():
    pid = _orphan({JOB_ENV: "job-under-test"})
    other = _orphan({JOB_ENV: "another-job"})
    try:
        assert [p.pid for p in job_processes(JOB_ENV, "job-under-test")] == [pid]
        assert stop_job("job-under-test") == []
        assert job_processes(JOB_ENV, "job-under-test") == []
        assert [p.pid for p in job_processes(JOB_ENV, "another-job")] == [other]
    finally:
        os.kill(other, signal.SIGKILL)


def test_a_tag_is_taken_while_a_process_of_its_job_lives_without_the_lock(tmp_path):
    base = BaseLayout(tmp_path / "base")
    base.checkpoints_root.mkdir(parents=True)
    base.tag_lock("d20-pi").write_text("")
    pid = _orphan({TAG_LOCK_ENV: str(base.tag_lock("d20-pi"))})
    try:
        assert f"PIDs {pid}" in (lock_holder(base, "d20-pi") or "")
        with pytest.raises(LaunchError, match=f"still being written: 1 process.*PIDs {pid}"):
            with TagLocks(base, ["d20-pi"]):
                pass
        assert lock_holder(base, "d20-yarn") is None
    finally:
        os.kill(pid, signal.SIGKILL)
    assert _wait_gone(pid)
    assert lock_holder(base, "d20-pi") is None
    with TagLocks(base, ["d20-pi"]) as locks:
        assert locks.env("d20-pi") == {TAG_LOCK_ENV: str(base.tag_lock("d20-pi"))}
