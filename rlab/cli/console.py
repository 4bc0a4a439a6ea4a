"""The CLI's consoles: results to stdout, diagnostics to stderr. Only `rlab.cli` prints."""

from rich.console import Console

out = Console()
err = Console(stderr=True)
