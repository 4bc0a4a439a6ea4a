"""A job started through the lifeline dies with the process that started it, whatever kills that process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlab.orchestrate.lifeline import main

LAUNCHER = """
import subprocess, sys, time
from rlab.orchestrate.lifeline import lifeline_argv
job = subprocess.Popen(lifeline_argv(["sleep", "300"]), start_new_session=True)
print(job.pid, flush=True)
time.sleep(300)
"""


def _running(pid: int, name: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return (
            name in Path(f"/proc/{pid}/cmdline").read_bytes().decode()
            and stat.rsplit(")", 1)[1].split()[0] != "Z"
        )
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkill_of_the_launcher_takes_its_job_along():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True)
    job = int(launcher.stdout.readline())
    deadline = time.time() + 300  # a hang guard, not a timing
    while not _running(job, "sleep") and time.time() < deadline:  # the shim has exec'd the command
        time.sleep(0.05)
    assert _running(job, "sleep")
    launcher.kill()  # SIGKILL: no handler of ours runs
    launcher.wait(timeout=30)
    deadline = time.time() + 20
    while _running(job, "sleep") and time.time() < deadline:
        time.sleep(0.05)
    assert not _running(job, "sleep")


def test_the_shim_does_not_start_an_orphan(tmp_path):
    marker = tmp_path / "started"
    # told its parent is a process that is not its parent (as when rlab died before the shim ran): exits 1
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlab.orchestrate.lifeline",
            str(os.getpid() + 999_999),
            "--",
            "touch",
            str(marker),
        ],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 1 and not marker.exists()
    ok = subprocess.run(
        [sys.executable, "-m", "rlab.orchestrate.lifeline", str(os.getpid()), "--", "touch", str(marker)],
        capture_output=True,
        timeout=60,
    )
    assert ok.returncode == 0 and marker.exists()


def test_usage_line_without_a_command():
    with pytest.raises(SystemExit, match="usage"):
        main(["123"])
