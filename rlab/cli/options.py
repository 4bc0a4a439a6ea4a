"""Shared Typer option aliases, so every command spells a flag the same way with the same help.

Help layout: short metavars (N, DIR, FILE, NAME) and no `<bool>` on switches keep the help column
wide at 80 columns; options are grouped into panels (the basics first, then where things live, then
multi-node / SLURM). Defaults that come from the spec are named in the help text ("spec: train.steps,
default 100"); tests/cli/test_help.py checks they match the spec models. `tags_command` is the one
signature of `rlab ls` and `rlab status`.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from rlab.paths import BaseLayout, default_base_dir, name_problem

PATHS_PANEL = "Where things live"
MULTI_NODE_PANEL = "Multi-node / SLURM"
EVALS_PANEL = "Which evals"
STATS_PANEL = "Statistics"


class Launcher(str, Enum):
    """How a job is started (spec: launch.launcher)."""

    local = "local"
    slurm = "slurm"


def at_least(low: float):
    """A callback refusing numbers below `low` (click's own `min=` prints `[x>=1]` into every help line)."""

    def check(value: float | None) -> float | None:
        if value is not None and value < low:
            raise typer.BadParameter(f"must be >= {low} (got {value})")
        return value

    return check


def a_name(kind: str):
    """A callback refusing a --tag/--base-tag/--experiment that is not a name (`rlab.paths.name_problem`, the spec's
    rule): a tag is a folder under the base or results dir, never a path to elsewhere."""

    def check(value: str | None) -> str | None:

        problem = None if value is None else name_problem(kind, value)
        if problem is not None:
            raise typer.BadParameter(f"{problem} (a name, not a path)")
        return value

    return check


def switch(*names: str, help: str, panel: str | None = None):  # noqa: A002 - typer's own keyword
    """A boolean flag without the `<bool>` type column."""
    return typer.Option(*names, help=help, metavar="", rich_help_panel=panel)


def number(*names: str, low: float, help: str, metavar: str = "N", panel: str | None = None):  # noqa: A002
    """A numeric option refusing values below `low` (`at_least`), its metavar N unless named."""
    return typer.Option(*names, metavar=metavar, callback=at_least(low), rich_help_panel=panel, help=help)


def tag_option(help: str, metavar: str | None = "TAG"):  # noqa: A002 - typer's own keyword
    """`--tag/-t`: a tag's name (`a_name`), never a path."""
    return typer.Option("--tag", "-t", metavar=metavar, callback=a_name("tag"), help=help)


def experiment_option(help: str, panel: str | None = PATHS_PANEL):  # noqa: A002 - typer's own keyword
    """`--experiment/-e NAME`: an experiment's name (`a_name`), never a path."""
    return typer.Option(
        "--experiment", "-e", metavar="NAME", callback=a_name("experiment"), rich_help_panel=panel, help=help
    )


def in_panel(names: str, panel: str | None, help: str, metavar: str | None = None):  # noqa: A002
    """An option shown in `panel` (a `--x/--no-x` pair gets no metavar: pass "")."""
    return typer.Option(names, metavar=metavar, rich_help_panel=panel, help=help)


def spec_overrides(flags: dict[str, Any], **renamed: str) -> dict[str, Any]:
    """A command's flags that set a spec field, as `load_spec`'s named overrides: each flag named like one
    (`rlab.spec.loading.OVERRIDE_PATHS`, or `variants`), or `renamed` (flag -> override). `flags`: the command's
    `locals()` before its first statement (typer's converted values; click's `ctx.params` holds them unconverted)."""
    from rlab.spec.loading import OVERRIDE_PATHS

    named = {renamed.get(name, name): value for name, value in flags.items()}
    return {name: value for name, value in named.items() if name in OVERRIDE_PATHS or name == "variants"}


def passed(flags: dict[str, Any], *names: str) -> dict[str, Any]:
    """The named flags of `flags` (as for `spec_overrides`), to pass on by name."""
    return {name: flags[name] for name in names}


SpecOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--spec",
        "-s",
        metavar="FILE",
        dir_okay=False,
        help="Experiment spec (experiments/NAME.yaml). Flags override its fields.",
    ),
]
BaseDirOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--base-dir",
        metavar="DIR",
        file_okay=False,
        rich_help_panel=PATHS_PANEL,
        help="nanochat base dir. (default: $RLAB_BASE_DIR, $NANOCHAT_BASE_DIR, ~/.cache/nanochat)",
    ),
]
BaseTagOpt = Annotated[
    Optional[str],
    typer.Option(
        "--base-tag",
        metavar="TAG",
        callback=a_name("tag"),
        rich_help_panel=PATHS_PANEL,
        help="Base model tag (spec: base.tag). (default: d20)",
    ),
]
ResultsDirOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--results-dir",
        metavar="DIR",
        file_okay=False,
        rich_help_panel=PATHS_PANEL,
        help="Results root. (default: $RLAB_RESULTS_DIR, then ./results)",
    ),
]
ExperimentOpt = Annotated[
    Optional[str], experiment_option("Experiment name (spec: name). (default: the base tag)")
]
ExperimentFilterOpt = Annotated[
    Optional[str],
    experiment_option("Only this experiment. (default: $RLAB_EXPERIMENT, else the only one, else all)"),
]
NprocOpt = Annotated[
    Optional[int],
    number("--nproc", low=1, help="Processes per node per job. (default: every visible GPU, or 1 on CPU)"),
]
StepsOpt = Annotated[
    Optional[int],
    number(
        "--steps",
        low=0,
        help="Optimizer steps of the run, in total: with --resume, a run stopped at 60 of 100 does the last 40 "
        "(spec: train.steps; 0 = training-free arms only). (default: 100)",
    ),
]
StepOpt = Annotated[
    Optional[int], number("--step", low=0, help="Checkpoint step. (default: newest complete)")
]
DryRunOpt = Annotated[bool, switch("--dry-run", help="Print the plan and the exact commands; touch nothing.")]
ForceOpt = Annotated[bool, switch("--force", help="Replace existing tags (says what it deletes first).")]
ResumeOpt = Annotated[
    bool,
    switch(
        "--resume",
        help="Continue existing tags from their newest checkpoint up to --steps in total (not --steps more).",
    ),
]
JsonOpt = Annotated[bool, switch("--json", help="Print the result as JSON on stdout (for scripts).")]
LauncherOpt = Annotated[
    Optional[Launcher],
    typer.Option(
        "--launcher",
        rich_help_panel=MULTI_NODE_PANEL,
        show_default=False,
        case_sensitive=False,
        help="local: torchrun here; slurm: one sbatch job per variant (spec: launch.launcher). "
        "(default: local)",
    ),
]
MaxRestartsOpt = Annotated[
    Optional[int],
    number(
        "--max-restarts",
        low=0,
        panel=MULTI_NODE_PANEL,
        help="torchrun --max-restarts (spec: launch.max_restarts). (default: 0)",
    ),
]
NnodesOpt = Annotated[
    Optional[int],
    number(
        "--nnodes", low=1, panel=MULTI_NODE_PANEL, help="Nodes per job (spec: launch.nnodes). (default: 1)"
    ),
]
NodeRankOpt = Annotated[
    Optional[int],
    number(
        "--node-rank",
        low=0,
        panel=MULTI_NODE_PANEL,
        help="This node's rank; run the same command on every node. (default: 0)",
    ),
]
RdzvEndpointOpt = Annotated[
    Optional[str],
    in_panel(
        "--rdzv-endpoint", MULTI_NODE_PANEL, "Rendezvous of the first node (multi-node).", "HOST[:PORT]"
    ),
]
GpusPerVariantOpt = Annotated[
    Optional[int],
    number(
        "--gpus-per-variant",
        low=1,
        panel=MULTI_NODE_PANEL,
        help="GPUs per job; fewer than visible runs variants concurrently. (default: --nproc)",
    ),
]

# `rlab report` and `rlab compare`: the sign-flip tests' draws, and what they print.
DrawsOpt = Annotated[
    int,
    number(
        "--draws",
        "--bootstrap",
        low=100,
        panel=STATS_PANEL,
        help="Monte Carlo draws per sign-flip test (p resolves to 1/(draws+1); tests of 16 units or fewer are exact).",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Do not print the tables.")]
TablesJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print what was written and every table as JSON (stdout).")
]


def tags_command(show: Callable[[BaseLayout, Path, str | None, bool], None]) -> Callable[..., None]:
    """A command over the tags of one experiment or all (`rlab ls`, `rlab status`): its flags resolved, `show` gets
    the base dir, the results root, the experiment (None: all) and --json. `show`'s docstring is the command's help."""

    def command(
        experiment: ExperimentFilterOpt = None,
        base_dir: BaseDirOpt = None,
        results_dir: ResultsDirOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        from rlab.orchestrate.experiments import experiment_filter

        base = BaseLayout((base_dir or default_base_dir()).expanduser())
        chosen, results_root = experiment_filter(experiment, results_dir)
        show(base, results_root, chosen, as_json)

    command.__doc__ = show.__doc__
    return command
