"""`rlab eval`: evaluate one tag (or --all tags of an experiment) with the eval worker.

    rlab eval --tag d20-pi                        # settings from results/<exp>/spec.resolved.yaml if there
    rlab eval --spec experiments/demo.yaml --all
    rlab eval --tag d20-yarn --no-core --lengths 2048,8192,32768 --nproc 8

Writes evals/<tag>/eval_run.json, then runs `python -m rlab.evals` on it (under torchrun when
--nproc > 1), streaming its output to the terminal and to evals/<tag>/eval.log. The tag must
be named: rlab never guesses which model you meant. This module parses the flags into an
`EvalRequest` and renders; resolving, running and summarising are `rlab.orchestrate.evaluation`'s.
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator) are local to the functions that use them, so
# `rlab --help` stays fast; the command's signature names only typer and option aliases.
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

from rlab.cli.console import err, out
from rlab.cli.core_tasks import print_tasks
from rlab.cli.help_layout import RlabCommand
from rlab.cli.options import (
    EVALS_PANEL,
    PATHS_PANEL,
    BaseDirOpt,
    BaseTagOpt,
    DryRunOpt,
    ExperimentOpt,
    JsonOpt,
    NprocOpt,
    ResultsDirOpt,
    SpecOpt,
    StepOpt,
    in_panel,
    number,
    passed,
    switch,
    tag_option,
)
from rlab.errors import SpecError
from rlab.evals import catalog  # noqa: TID253 - the switches the help lists: no pydantic

if TYPE_CHECKING:
    from rlab.evals.definition import EvalDefinition

SWITCHES = "eval_switches"
"""Where the `--<eval>/--no-<eval>` switches leave their values: `ctx.meta[SWITCHES]`, eval name -> on or off."""


REQUEST_FLAGS = (
    "tag all_tags spec_path experiment base_dir base_tag results_dir step max_per_task eval_bundle nproc force"
).split()
"""The flags that are `EvalRequest` fields as they are (--lengths, --tasks and the switches are parsed first)."""


class EvalCommand(RlabCommand):
    """`rlab eval`: the options of `eval_tag`, with `eval_switch` for every eval of the catalog (`rlab.evals.catalog`)
    before `--lengths`."""

    def __init__(self, *args: Any, params: list[Any], **kwargs: Any) -> None:
        at = next((i for i, p in enumerate(params) if p.name == "lengths"), len(params))
        switches = [eval_switch(d) for d in catalog.definitions()]
        super().__init__(*args, params=[*params[:at], *switches, *params[at:]], **kwargs)


def eval_switch(definition: EvalDefinition) -> Any:
    """`--<eval>/--no-<eval>` for one eval: on or off for this run, recorded in `ctx.meta[SWITCHES]` (not given, the
    spec says). Typer makes the option (a click option of its own kind) from a one-option command, so its help lists
    it like the others."""

    def record(ctx: typer.Context, value: Optional[bool]) -> None:
        if value is not None:
            ctx.meta.setdefault(SWITCHES, {})[definition.name] = value

    def switch(
        value: Optional[bool] = typer.Option(
            None,
            f"--{definition.flag}/--no-{definition.flag}",
            metavar="",
            rich_help_panel=EVALS_PANEL,
            help=definition.help,
            expose_value=False,
            callback=record,
        ),
    ) -> None:
        """A holder for the option."""

    holder = typer.Typer(add_completion=False)
    holder.command()(switch)
    (option,) = typer.main.get_command(holder).params
    option.name = definition.name
    return option


def eval_tag(
    ctx: typer.Context,
    tag: Annotated[Optional[str], tag_option("Tag to evaluate (e.g. d20-pi).")] = None,
    all_tags: Annotated[bool, switch("--all", help="Evaluate every variant tag of the experiment.")] = False,
    as_json: JsonOpt = False,
    spec_path: SpecOpt = None,
    experiment: ExperimentOpt = None,
    base_dir: BaseDirOpt = None,
    base_tag: BaseTagOpt = None,
    results_dir: ResultsDirOpt = None,
    step: StepOpt = None,
    lengths: Annotated[
        Optional[str],
        in_panel(
            "--lengths",
            EVALS_PANEL,
            "Context lengths for BPB-vs-length, e.g. 1024,2048,4096. "
            "(default: the spec's eval.lengths, else 0.5x-8x the model's length)",
            metavar="N,N,...",
        ),
    ] = None,
    max_per_task: Annotated[
        Optional[int],
        number("--max-per-task", low=1, panel=EVALS_PANEL, help="CORE examples per task. (default: all)"),
    ] = None,
    tasks: Annotated[
        Optional[str],
        in_panel(
            "--tasks",
            EVALS_PANEL,
            "CORE tasks, lm-eval style: labels or globs (hellaswag,arc_*); turns --core on. (default: all)",
            metavar="T,T,...",
        ),
    ] = None,
    list_tasks: Annotated[
        bool, switch("--list-tasks", help="List the CORE tasks of the bundle and exit.", panel=EVALS_PANEL)
    ] = False,
    eval_bundle: Annotated[
        Optional[Path],
        in_panel(
            "--eval-bundle",
            PATHS_PANEL,
            "DCLM CORE bundle dir. (default: $RLAB_EVAL_BUNDLE, <base_dir>/eval_bundle, then where "
            "`rlab bundle download` puts it)",
            metavar="DIR",
        ),
    ] = None,
    nproc: NprocOpt = None,
    force: Annotated[
        bool,
        switch(
            "--force",
            help="Drop evals of an earlier checkpoint that this run does not redo (else it refuses).",
        ),
    ] = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Evaluate a tag with the experiment's evals (each switched on or off below) and write its per-tag outputs."""
    flags = dict(locals())  # every flag by its parameter name (nothing else is bound yet)

    from rlab.cli.reporting import ConsoleReporter
    from rlab.orchestrate.eval_plan import EvalRequest, plan_evals
    from rlab.orchestrate.evaluation import raise_for_failures, run_evals
    from rlab.spec.loading import parse_names

    if list_tasks or (tasks is not None and tasks.strip().lower() == "list"):
        print_tasks(spec_path, eval_bundle, base_dir=base_dir, results_dir=results_dir, as_json=as_json)
        return
    try:
        length_list = None if lengths is None else [int(x) for x in parse_names(lengths)]
    except ValueError:
        raise SpecError(f"--lengths: expected comma-separated integers (got {lengths!r}).") from None
    switches = dict(ctx.meta.get(SWITCHES, {}))
    if tasks is not None:  # --tasks turns CORE on
        if switches.get("core") is False:
            raise SpecError("--tasks picks CORE tasks, --no-core turns CORE off.", "Give one of them.")
        switches["core"] = True
    request = EvalRequest(
        **passed(flags, *REQUEST_FLAGS),
        switches=switches,
        lengths=length_list,
        tasks=None if tasks is None else parse_names(tasks),
    )
    plan = plan_evals(request)
    if dry_run:
        _print_dry_run(plan, as_json)
        return
    reporter = ConsoleReporter(out=err if as_json else out, err=err)  # --json: stdout is the JSON alone
    outcomes = run_evals(plan, reporter)
    if as_json:
        entries = [
            {
                **plan.entry(i, resolve=True),
                "ok": o.ok,
                **({} if o.ok else {"error": o.error[0] if o.error else None}),
            }
            for i, o in enumerate(outcomes)
        ]
        typer.echo(json.dumps({"dry_run": False, "tags": entries}, indent=2))
    raise_for_failures(plan, outcomes)
    if not as_json:
        reporter.next_step(f"rlab report -e {plan.spec.experiment} --results-dir {plan.spec.results_dir}")


def _print_dry_run(plan: Any, as_json: bool) -> None:
    """What a dry run would evaluate: its blockers, then each tag's plan and command (or all of it as JSON)."""

    from rlab.orchestrate.launch import format_command

    for blocker in plan.blockers:
        err.print(f"[yellow]{escape(blocker.message)}[/] {escape(blocker.hint or '')}", highlight=False)
    entries = []
    for index, cfg in enumerate(plan.configs):
        entries.append({**plan.entry(index, resolve=False), "config": cfg.model_dump(mode="json")})
        if not as_json:
            for line in describe_eval_config(cfg):
                out.print(line, highlight=False, markup=False, soft_wrap=True)
            out.print(
                f"  {format_command(entries[-1]['command'])}", highlight=False, markup=False, soft_wrap=True
            )
    if as_json:
        typer.echo(json.dumps({"dry_run": True, "tags": entries}, indent=2))


def describe_eval_config(cfg: Any) -> list[str]:
    """A dry run's plan of one tag, readable (`--json` has every setting): what runs, at which lengths, where."""
    e = cfg.eval
    step = "newest step" if cfg.step is None else f"step {cfg.step}"
    lengths = (
        ", ".join(f"{n:,}" for n in e.lengths) if e.lengths else f"the default grid to 2 x {e.target_len:,}"
    )
    lines = [
        f"{cfg.tag} ({step} in {cfg.base_dir}) -> {cfg.out_dir}",
        f"  evals: {', '.join(e.evals)}; lengths: {lengths}",
    ]
    details = []
    if "core" in e.evals:
        tasks = "all tasks" if not e.core_tasks else ", ".join(e.core_tasks)
        per = "" if e.max_per_task is None else f", {e.max_per_task} per task"
        details.append(f"CORE {tasks}{per}")
    if "passkey" in e.evals:
        details.append(f"passkey {e.passkey_trials} trials x {len(e.passkey_depths)} depths")
    if "ruler" in e.evals:
        details.append(f"RULER {', '.join(e.ruler_tasks)} ({e.ruler_trials} trials)")
    details.append(f"device_batch_size {e.device_batch_size}, seed {e.seed}")
    lines.append("  " + "; ".join(details))
    return lines
