"""The CLI's consoles: results to stdout, diagnostics to stderr. Only `rlab.cli` prints."""

from contextlib import contextmanager

from rich.console import Console

out = Console()
err = Console(stderr=True)


@contextmanager
def human_lines_to_stderr():
    """For --json: while active, what commands print for people goes to stderr, so stdout is only the JSON."""
    global out
    saved = out
    out = err
    try:
        yield
    finally:
        out = saved
