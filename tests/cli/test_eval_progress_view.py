"""`rlab eval` draws the worker's progress events as a bar on a terminal and keeps them out of eval.log."""

from __future__ import annotations

import io
import sys

from rich.console import Console

from rlab.cli.eval_progress import EvalProgressView, keep_in_log
from rlab.evals.progress import EVENT_PREFIX
from rlab.orchestrate.launch import run_streaming


def test_view_takes_event_lines_and_leaves_the_rest():
    buffer = io.StringIO()
    with EvalProgressView(Console(file=buffer, force_terminal=True, width=100)) as view:
        assert view.handle(EVENT_PREFIX + '{"eval": "core", "done": 0, "total": 500}')
        assert view.handle(EVENT_PREFIX + '{"eval": "core", "done": 500, "total": 500}')
        assert not view.handle("2026-11-23 01:00:00 [rank 0] INFO rlab.evals.runner: evaluating ...")
        assert not view.handle(EVENT_PREFIX + "not json")
    text = buffer.getvalue()
    assert "core" in text and "500/500" in text and "ETA" in text
    assert view.env == {"RLAB_PROGRESS": "events"}


def test_event_lines_reach_the_view_but_not_the_log(tmp_path):
    program = (
        f'import sys; sys.stderr.write({EVENT_PREFIX!r} + \'{{"eval": "bpb", "done": 1, "total": 2}}\\n\');'
        " print('a log line')"
    )
    seen: list[str] = []
    code = run_streaming(
        [sys.executable, "-c", program], tmp_path / "eval.log", on_line=seen.append, keep_in_log=keep_in_log
    )
    assert code == 0
    assert seen == [EVENT_PREFIX + '{"eval": "bpb", "done": 1, "total": 2}', "a log line"]
    log = (tmp_path / "eval.log").read_text()
    assert log.splitlines()[1:] == ["a log line"]  # after the command line the log starts with
