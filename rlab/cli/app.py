"""Root Typer app: a table of contents of rlab's commands, and the one place errors are rendered.

Every command lives in its own module and is registered here by name (`continue` is a Python
keyword, so command names and function names differ). Nothing here imports torch: heavy
imports happen inside the command that needs them, so `rlab --help` is instant.
"""

from __future__ import annotations

import functools
import os
import signal
import sys

import typer
from rich.markup import escape

from rlab import __version__
from rlab.cli import (
    bundle_cmd,
    compare_cmd,
    continue_cmd,
    data_cmd,
    demo_cmd,
    eval_cmd,
    export_cmd,
    ls_cmd,
    memory_cmd,
    power_cmd,
    pretrain_cmd,
    report_cmd,
    rope_cmd,
    sample_cmd,
    spec_cmd,
    status_cmd,
)
from rlab.cli.console import err
from rlab.cli.examples import epilog
from rlab.cli.help_layout import RlabCommand, RlabGroup
from rlab.errors import RlabError, Terminated, interrupt_exit_code, os_error

app = typer.Typer(
    name="rlab",
    help="Controlled context-extension (RoPE scaling) experiments on nanochat-style GPT models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    cls=RlabGroup,
)

_COMMAND_CLASSES = {"eval": eval_cmd.EvalCommand}  # rlab eval adds a switch per eval of the catalog

# The mission: continue -> eval -> report. Each command's --help ends with examples (rlab.cli.examples).
for _name, _function, _panel in (
    ("continue", continue_cmd.continue_training, "Experiment"),
    ("eval", eval_cmd.eval_tag, "Experiment"),
    ("report", report_cmd.build_report, "Experiment"),
    ("compare", compare_cmd.compare, "Experiment"),
    ("demo", demo_cmd.run_demo, "Experiment"),
    ("pretrain", pretrain_cmd.pretrain, "Experiment"),
    ("power", power_cmd.power_plan, "Experiment"),
    ("ls", ls_cmd.list_tags, "Inspect"),
    ("status", status_cmd.status, "Inspect"),
    ("sample", sample_cmd.sample, "Inspect"),
    ("export", export_cmd.export_tag, "Inspect"),
    ("memory", memory_cmd.memory, "Inspect"),
    ("validate", spec_cmd.validate, "Spec"),
    ("schema", spec_cmd.schema, "Spec"),
):
    _cls = _COMMAND_CLASSES.get(_name, RlabCommand)
    app.command(_name, cls=_cls, rich_help_panel=_panel, epilog=epilog(_name))(_function)
app.add_typer(rope_cmd.app, name="rope", rich_help_panel="Inspect")
app.add_typer(data_cmd.app, name="data", rich_help_panel="Set-up")
app.add_typer(bundle_cmd.app, name="bundle", rich_help_panel="Set-up")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", metavar="", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Controlled context-extension (RoPE scaling) experiments on nanochat-style GPT models.

    Typical use: `rlab continue --from-step 21400 --variants pi,ntk,yarn`, then
    `rlab eval --tag d20-pi`, then `rlab report`.
    """


def render_error(exc: RlabError) -> None:
    """Print an RlabError as one or two red lines on stderr (message, then hint)."""

    err.print(f"[bold red]Error:[/] {escape(exc.message)}", highlight=False, soft_wrap=True)
    if exc.hint:
        err.print(exc.hint, highlight=False, markup=False, soft_wrap=True)


def render_usage_error(exc) -> None:
    """A click usage error as two lines (the problem, then where help is), not a boxed panel."""

    message = exc.format_message().replace("Value error, ", "")
    err.print(f"[bold red]Error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        err.print(f"See: {ctx.command_path} --help", highlight=False, markup=False, soft_wrap=True)


def rich_help(exc) -> None:
    """What `rlab` (no arguments) shows: the group's help."""
    typer.echo(exc.ctx.get_help())


@functools.cache
def click_command():
    """The click command Typer builds from `app` (what `app()` runs), built once per process."""
    return typer.main.get_command(app)


def _terminated(signum: int, frame: object) -> None:  # noqa: ARG001
    raise Terminated


def main() -> None:
    """Console-script entry point: run the app; a user error is a message and exit 1, never a traceback.

    Click runs outside its standalone mode so that everything comes back here: a usage error is two
    lines (exit 2), an `RlabError` its message and hint (its `exit_code`: 1, or 130/143 for a run that
    Ctrl-C/SIGTERM stopped), and an OSError that escaped a command (a full disk, a read-only folder)
    names the path (exit 1). SIGTERM is raised as `Terminated` (a KeyboardInterrupt), so a run stops
    its jobs exactly as on Ctrl-C. `RLAB_DEBUG=1` shows the traceback.
    """
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        _run()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run() -> None:
    debug = bool(os.environ.get("RLAB_DEBUG"))
    try:
        code = click_command()(standalone_mode=False, prog_name="rlab")  # click's errors come back here
        sys.exit(code if isinstance(code, int) else 0)
    except typer.TyperException as exc:  # a usage error: bad flag, missing value, choice not in the list
        if (
            type(exc).__name__ == "NoArgsIsHelpError"
        ):  # bare `rlab` / `rlab data`: the help, as click shows it
            rich_help(exc)
        else:
            render_usage_error(exc)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt) as exc:  # click turns an interrupt into Abort (cause kept)
        render_error(RlabError("Interrupted."))
        sys.exit(interrupt_exit_code(exc))
    except RlabError as exc:
        if debug:
            raise
        render_error(exc)
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `rlab ls | head`: the reader left; nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes stdout at exit
        sys.exit(1)
    except OSError as exc:  # a full disk, a read-only or vanished folder: name the path, no traceback
        if debug:
            raise
        render_error(os_error(exc))
        sys.exit(1)
    except RecursionError:  # absurdly nested input that slipped past the spec loader
        if debug:
            raise
        render_error(RlabError("Input nested too deeply to process.", "Check the spec or file you passed."))
        sys.exit(1)
