"""Run the real console entry point (`rlab.cli.app.main`) in this process and capture what it prints.

The same code path as the installed `rlab` script (error rendering included), without a Python
start-up per call, so bounded fuzz tests can run hundreds of inputs in seconds.
"""

from __future__ import annotations

import io
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from rlab.cli.app import main


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    exception: BaseException | None = None  # anything but SystemExit that escaped main(): a traceback

    @property
    def text(self) -> str:
        return self.out + self.err


def run_main(*args: str, cwd: Path | None = None, columns: int = 200) -> Outcome:
    """`rlab ARGS...` as the console script runs it; `exception` is set if it would print a traceback."""
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_cwd, old_cols = sys.argv, os.getcwd(), os.environ.get("COLUMNS")
    sys.argv = ["rlab", *args]
    os.environ["COLUMNS"] = str(columns)
    code, exception = 0, None
    try:
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # noqa: BLE001 - this is what the test looks for
        code, exception = -1, exc
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
        if old_cols is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_cols
    return Outcome(code, out.getvalue(), err.getvalue(), exception)


def assert_clean_error(outcome: Outcome, *fragments: str, code: int = 1, max_lines: int | None = 2) -> None:
    """Non-zero exit, an `Error:` line, no traceback, at most `max_lines` lines, each fragment present."""
    assert outcome.exception is None, f"traceback: {outcome.exception!r}"
    assert outcome.code == code, (outcome.code, outcome.text)
    assert "Traceback" not in outcome.text
    assert outcome.err.startswith("Error:"), outcome.err
    if max_lines is not None:
        assert len(outcome.err.strip().splitlines()) <= max_lines, outcome.err
    text = " ".join(outcome.err.split())
    for fragment in fragments:
        assert fragment in text, outcome.err
