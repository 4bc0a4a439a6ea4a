"""`rlab data ...`: not built yet."""

import typer

from rlab.cli.not_built import not_built

app = typer.Typer(help="Prepare corpora and tokenizers.", no_args_is_help=True)


@app.command("prepare")
def prepare() -> None:
    """Not built yet (issue #3)."""
    raise not_built("data prepare", 3)
