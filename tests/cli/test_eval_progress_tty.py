"""`rlab eval` on a real terminal (a pseudo-terminal): the worker's progress is drawn as a bar with ETA."""

from __future__ import annotations

import os
import pty
import subprocess

import pytest

from rlab.paths import ExperimentLayout
from tests.cli.harness import start_process
from tests.conftest import EVAL_BUNDLE_DIR
from tests.evals.test_runner import TAG, make_base


@pytest.mark.slow
def test_eval_in_a_terminal_draws_a_bar_per_eval(tiny_base_dir, tmp_path):

    base = make_base(tiny_base_dir, tmp_path)
    results = tmp_path / "res"
    leader, follower = pty.openpty()
    args = [
        "eval",
        "--tag",
        TAG,
        "--tasks",
        "copa,winograd",
        "--base-dir",
        str(base),
        "--results-dir",
        str(results),
        "--eval-bundle",
        str(EVAL_BUNDLE_DIR),
        "--experiment",
        "x",
        "--no-bpb-length",
        "--no-passkey",
        "--no-ruler",
        "--max-per-task",
        "8",
        "--nproc",
        "1",
    ]
    proc = start_process(
        *args, columns=120, env={"TERM": "xterm"}, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed: every process writing to it has exited
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=240) == 0
    os.close(leader)
    screen = b"".join(chunks).decode(errors="replace")
    assert "rlab-progress" not in screen  # the events were drawn, not echoed
    assert "ETA" in screen and "16/16" in screen  # CORE: 2 tasks x 8 examples
    assert "bpb" in screen and "CORE (2 of 22 tasks)" in screen
    log = ExperimentLayout(results, "x").eval_log(TAG).read_text()
    assert "rlab-progress" not in log and "evaluating" in log
