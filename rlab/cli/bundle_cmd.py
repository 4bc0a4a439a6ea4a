"""`rlab bundle ...`: not built yet."""

import typer

from rlab.cli.not_built import not_built

app = typer.Typer(help="Download and check the DCLM CORE eval bundle.", no_args_is_help=True)


@app.command("download")
def download() -> None:
    """Not built yet (issue #5)."""
    raise not_built("bundle download", 5)
