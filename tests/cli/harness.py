"""The one way tests run the `rlab` command line.

`run_main` (the default) calls the console entry point (`rlab.cli.app.main`) in this process: the same code
path as the installed script (exit codes and error rendering included) without a Python start-up per call,
so bounded fuzz tests can run hundreds of inputs in seconds. `run_process` and `start_process` run
`python -m rlab` as a separate process, for the tests that need one: signals and kills, a real terminal,
torchrun children, a fresh interpreter (hash seed, import state) or end-to-end runs as a user starts them.
Both return the same `Outcome`, so the same assertions read either.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlab.cli import console
from rlab.cli.app import main

REPO = Path(__file__).resolve().parents[2]

Env = Mapping[str, str | None]
"""Variables to set for one call on top of this process's environment; `None` unsets one."""


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    exception: BaseException | None = None  # anything but SystemExit that escaped main(): a traceback

    @property
    def text(self) -> str:
        return self.out + self.err


@contextmanager
def _environment(env: Env) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    try:
        _apply(os.environ, env)
        yield
    finally:
        _apply(os.environ, saved)


def _apply(target: Any, env: Env) -> None:
    for name, value in env.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value


@contextmanager
def _console_width(columns: int) -> Iterator[None]:
    """The CLI's consoles are made once, at import, and take their width from `COLUMNS` then (as in a real
    start-up); a call in this process sets the width it asks for and puts the old one back."""
    consoles = (console.out, console.err)
    saved = [c.width for c in consoles]
    try:
        for c in consoles:
            c.width = columns
        yield
    finally:
        for c, width in zip(consoles, saved, strict=True):
            c.width = width


def run_main(*args: str, cwd: Path | None = None, columns: int = 200, env: Env | None = None) -> Outcome:
    """`rlab ARGS...` as the console script runs it; `exception` is set if it would print a traceback."""
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_cwd = sys.argv, os.getcwd()
    sys.argv = ["rlab", *args]
    code, exception = 0, None
    try:
        with _environment({"COLUMNS": str(columns), **(env or {})}), _console_width(columns):
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
    return Outcome(code, out.getvalue(), err.getvalue(), exception)


def process_argv(*args: str) -> list[str]:
    """The command line of a separate `rlab ARGS...` (this interpreter, so the same environment)."""
    return [sys.executable, "-m", "rlab", *args]


def process_env(columns: int = 200, env: Env | None = None) -> dict[str, str]:
    """This process's environment with `COLUMNS` and the call's own variables applied."""
    full = dict(os.environ)
    _apply(full, {"COLUMNS": str(columns), **(env or {})})
    return full


def run_process(
    *args: str,
    cwd: Path | None = REPO,
    columns: int = 200,
    env: Env | None = None,
    timeout: float | None = 300,
) -> Outcome:
    """`rlab ARGS...` in a separate process, waited for; what it printed comes back as an `Outcome`."""
    done = subprocess.run(
        process_argv(*args),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=process_env(columns, env),
        timeout=timeout,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)


def start_process(
    *args: str, cwd: Path | None = REPO, columns: int = 200, env: Env | None = None, **popen: Any
) -> subprocess.Popen:
    """`rlab ARGS...` started in a separate process and not waited for (a test that signals or kills it);
    `popen` goes to `subprocess.Popen` (stdout/stderr, start_new_session, preexec_fn, ...)."""
    return subprocess.Popen(process_argv(*args), cwd=cwd, env=process_env(columns, env), **popen)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie or a finished process does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def processes_mentioning(text: str) -> list[int]:
    """The running processes whose command line contains `text` (a job's run.json: its launcher, workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace") and alive(
                    int(entry.name)
                ):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


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


def assert_user_error(outcome: Outcome, *fragments: str) -> None:
    """Exit 1 and no traceback, each fragment in stderr; unlike `assert_clean_error`, any number of lines and
    anything before the error (warnings, a plan, a failed job's log tail)."""
    assert outcome.exception is None, f"traceback: {outcome.exception!r}"
    assert outcome.code == 1, outcome.text
    assert "Traceback" not in outcome.err
    text = " ".join(outcome.err.split())
    for fragment in fragments:
        assert fragment in text, outcome.err
