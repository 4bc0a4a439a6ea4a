"""`rlab rope ...`: not built yet."""

import typer

from rlab.cli.not_built import not_built

app = typer.Typer(help="Inspect RoPE variants.", no_args_is_help=True)


@app.command("inspect")
def inspect() -> None:
    """Not built yet (issue #2)."""
    raise not_built("rope inspect", 2)
