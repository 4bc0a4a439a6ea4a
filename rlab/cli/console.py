"""The CLI's consoles: results to stdout, diagnostics to stderr. Only `rlab.cli` prints.

A command with --json passes `err` where people's lines would go (e.g. `ConsoleReporter(out=err, err=err)`),
so stdout carries only its JSON; nothing reassigns these.
"""

from rich.console import Console

out = Console()
err = Console(stderr=True)
