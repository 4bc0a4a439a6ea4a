"""`rlab eval` draws the worker's progress events as a bar on a terminal and keeps them out of eval.log."""

from __future__ import annotations

import io
import sys

from rich.console import Console

from rlab.cli.reporting import ConsoleReporter
from rlab.evals.progress import EVENT_PREFIX
from rlab.orchestrate.evaluation import keep_in_log
from rlab.orchestrate.launch import run_streaming


def test_console_reporter_draws_progress_on_a_terminal_and_prints_worker_lines_as_text(tmp_path):
    buffer = io.StringIO()
    terminal = Console(file=buffer, force_terminal=True, width=100)
    reporter = ConsoleReporter(out=terminal, err=terminal)
    assert reporter.wants_progress_events
    with reporter.evaluating("d2", ["core"], tmp_path):
        reporter.eval_progress("d2", "core", 0, 500)
        reporter.worker_line("d2", "[bold]not markup[/] [/broken")
        reporter.eval_progress("d2", "core", 500, 500)
    text = buffer.getvalue()
    assert "core" in text and "500/500" in text and "ETA" in text
    assert "[bold]not markup[/] [/broken" in text
    piped = ConsoleReporter(out=Console(file=io.StringIO()), err=Console(file=io.StringIO()))
    assert not piped.wants_progress_events  # a file or CI: the worker logs every 10% itself


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
