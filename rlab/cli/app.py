"""Root Typer app: a table of contents of rlab's commands, and the one place errors are rendered.

Every command lives in its own module and is registered here by name (`continue` is a Python
keyword, so command names and function names differ). Nothing here imports torch: heavy
imports happen inside the command that needs them, so `rlab --help` is instant.
"""

from __future__ import annotations

import os
import sys

import typer

from rlab import __version__
from rlab.cli import (
    bundle_cmd,
    continue_cmd,
    data_cmd,
    demo_cmd,
    eval_cmd,
    ls_cmd,
    pretrain_cmd,
    report_cmd,
    rope_cmd,
    sample_cmd,
    spec_cmd,
)
from rlab.errors import RlabError

app = typer.Typer(
    name="rlab",
    help="Controlled context-extension (RoPE scaling) experiments on nanochat-style GPT models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# The mission: continue -> eval -> report.
app.command("continue", rich_help_panel="Experiment")(continue_cmd.continue_training)
app.command("eval", rich_help_panel="Experiment")(eval_cmd.eval_tag)
app.command("report", rich_help_panel="Experiment")(report_cmd.build_report)
app.command("demo", rich_help_panel="Experiment")(demo_cmd.run_demo)
app.command("pretrain", rich_help_panel="Experiment")(pretrain_cmd.pretrain)
# Inspection and set-up.
app.add_typer(rope_cmd.app, name="rope", rich_help_panel="Inspect")
app.command("ls", rich_help_panel="Inspect")(ls_cmd.list_tags)
app.command("sample", rich_help_panel="Inspect")(sample_cmd.sample)
app.command("validate", rich_help_panel="Spec")(spec_cmd.validate)
app.command("schema", rich_help_panel="Spec")(spec_cmd.schema)
app.add_typer(data_cmd.app, name="data", rich_help_panel="Set-up")
app.add_typer(bundle_cmd.app, name="bundle", rich_help_panel="Set-up")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Controlled context-extension (RoPE scaling) experiments on nanochat-style GPT models.

    Typical use: `rlab continue --from-step 21400 --variants pi,ntk,yarn`, then
    `rlab eval --tag d20-pi`, then `rlab report`.
    """


def render_error(exc: RlabError) -> None:
    """Print an RlabError as one or two red lines on stderr (message, then hint)."""
    from rich.markup import escape

    from rlab.cli.console import err

    err.print(f"[bold red]Error:[/] {escape(exc.message)}", highlight=False, soft_wrap=True)
    if exc.hint:
        err.print(exc.hint, highlight=False, markup=False, soft_wrap=True)


def main() -> None:
    """Console-script entry point: run the app; a user error is a message and exit 1, never a traceback.

    Click's standalone mode handles usage errors, --help and exit codes; an `RlabError` raised by a
    command passes through it and is rendered here.
    """
    try:
        app()
    except RlabError as exc:
        if os.environ.get("RLAB_DEBUG"):
            raise
        render_error(exc)
        sys.exit(1)
