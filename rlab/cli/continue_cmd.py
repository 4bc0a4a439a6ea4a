"""`rlab continue`: clone a base checkpoint once per RoPE variant and continue each under torchrun.

    rlab continue --from-step 21400 --variants pi,ntk,yarn           # d20 in the default base dir
    rlab continue --spec experiments/rope_scaling_d20.yaml --dry-run  # the plan and the exact commands
    rlab continue --spec experiments/demo.yaml --variants ntk --resume

Sequence: resolve spec + flags -> preflight (reads the base step's meta: L0, loader position;
plans every tag and collects every problem, `rlab.orchestrate.preflight`) -> lock the tags ->
clone -> launch -> watch (`rlab.orchestrate.training`). This module parses flags and renders: the
plan of a dry run (`render_plan`, shared with `rlab pretrain`) and a reporter for the sequence.
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator, rich tables) are local to the functions that use
# them, so `rlab --help` stays fast; the command's signature names only typer and option aliases.
import json
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from rlab.cli.options import (
    BaseDirOpt,
    BaseTagOpt,
    DryRunOpt,
    ExperimentOpt,
    ForceOpt,
    GpusPerVariantOpt,
    LauncherOpt,
    MaxRestartsOpt,
    NnodesOpt,
    NodeRankOpt,
    NprocOpt,
    RdzvEndpointOpt,
    ResultsDirOpt,
    ResumeOpt,
    SpecOpt,
    StepsOpt,
    at_least,
)

if TYPE_CHECKING:
    from rlab.memory.plan import MemoryPlan
    from rlab.orchestrate.base_info import BaseInfo
    from rlab.orchestrate.launch import Job
    from rlab.orchestrate.preflight import Preflight
    from rlab.orchestrate.reporter import Reporter
    from rlab.report.power.spec import PowerCheck
    from rlab.spec.experiment import ExperimentSpec
    from rlab.spec.run import RunConfig


def continue_training(
    spec_path: SpecOpt = None,
    from_step: Annotated[
        Optional[int],
        typer.Option(
            "--from-step", metavar="N", callback=at_least(0), help="Base checkpoint step (spec: base.step)."
        ),
    ] = None,
    variants: Annotated[
        Optional[str],
        typer.Option(
            "--variants",
            "-v",
            metavar="NAMES",
            help="Comma-separated variants, any case, e.g. pi,ntk,yarn (the spec's, or built-in).",
        ),
    ] = None,
    experiment: ExperimentOpt = None,
    base_tag: BaseTagOpt = None,
    base_dir: BaseDirOpt = None,
    results_dir: ResultsDirOpt = None,
    steps: StepsOpt = None,
    seq_len: Annotated[
        Optional[int],
        typer.Option(
            "--seq-len",
            metavar="N",
            callback=at_least(1),
            help="New training length (train.seq_len). (default: --target-len)",
        ),
    ] = None,
    target_len: Annotated[
        Optional[int],
        typer.Option(
            "--target-len",
            metavar="N",
            callback=at_least(1),
            help="Target context (spec: target_len; default 4 x the base's length).",
        ),
    ] = None,
    seeds: Annotated[
        Optional[int],
        typer.Option(
            "--seeds",
            metavar="N",
            callback=at_least(1),
            rich_help_panel="Arms",
            help="Training replicates per variant, each with its own data order (train.seeds).",
        ),
    ] = None,
    zero_shot: Annotated[
        Optional[bool],
        typer.Option(
            "--zero-shot/--no-zero-shot",
            metavar="",
            rich_help_panel="Arms",
            help="Also make each variant's training-free arm (train.zero_shot).",
        ),
    ] = None,
    control: Annotated[
        bool,
        typer.Option(
            "--control/--no-control",
            metavar="",
            rich_help_panel="Arms",
            help="Also train the control arm, plain rope continued identically, which every verdict compares with "
            "(added unless named; a --resume keeps the tags already planned).",
        ),
    ] = True,
    replicate_base: Annotated[
        Optional[bool],
        typer.Option(
            "--replicate-base/--one-base",
            metavar="",
            rich_help_panel="Arms",
            help="Seed i starts from base replicate i (<base>-seed<i>, `rlab pretrain --seeds S`): the seed "
            "covers pretraining noise too (train.replicate_base).",
        ),
    ] = None,
    nproc: NprocOpt = None,
    max_restarts: MaxRestartsOpt = None,
    gpus_per_variant: GpusPerVariantOpt = None,
    nnodes: NnodesOpt = None,
    node_rank: NodeRankOpt = None,
    rdzv_endpoint: RdzvEndpointOpt = None,
    launcher: LauncherOpt = None,
    dry_run: DryRunOpt = False,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            metavar="",
            help="JSON on stdout: with --dry-run the resolved plan; else one object per event (JSON lines).",
        ),
    ] = False,
    resume: ResumeOpt = False,
    resume_from: Annotated[
        Optional[int],
        typer.Option(
            "--resume-from",
            metavar="N",
            callback=at_least(0),
            help="With --resume: resume each tag from its own step N; newer checkpoints (a broken one) are "
            "moved to <tag>/set_aside/, not deleted.",
        ),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Clone the base checkpoint once per variant and continue pretraining each under torchrun."""
    from rlab.orchestrate.control import with_control
    from rlab.orchestrate.launch import visible_gpus, with_default_nproc
    from rlab.orchestrate.preflight import plan_json, preflight_continue
    from rlab.orchestrate.tag_setup import build_jobs
    from rlab.orchestrate.training import start_continue, submit_slurm
    from rlab.spec.loading import load_spec

    spec = load_spec(
        spec_path,
        name=experiment,
        from_step=from_step,
        variants=variants,
        base_tag=base_tag,
        base_dir=base_dir,
        results_dir=results_dir,
        steps=steps,
        seeds=seeds,
        zero_shot=zero_shot,
        replicate_base=replicate_base,
        seq_len=seq_len,
        target_len=target_len,
        nproc=nproc,
        max_restarts=max_restarts,
        gpus_per_variant=gpus_per_variant,
        nnodes=nnodes,
        node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint,
        launcher=launcher,
    )
    spec = with_default_nproc(spec, visible_gpus())
    spec, control_warnings = with_control(spec, control=control, resume=resume)
    if resume_from is not None and not resume:
        raise typer.BadParameter(
            "goes with --resume (it picks the step a tag resumes from).", param_hint="--resume-from"
        )
    pf = preflight_continue(spec, resume=resume, force=force, launching=not dry_run, resume_from=resume_from)
    pf.warnings[:0] = control_warnings
    spec, runs = pf.spec, pf.runs
    if dry_run:
        reporter = console_reporter(json_out)
        trained = [run for run in runs if run.train.steps > 0]  # training-free arms are a clone, not a job
        jobs = build_jobs(spec, trained)
        check = power_check(spec, pf.base.sequence_len if pf.base else None)
        if json_out:
            typer.echo(json.dumps({**plan_json(pf, jobs), "power": check.as_dict()}, indent=2))
        else:
            render_plan(
                spec,
                runs,
                jobs,
                title=f"rlab continue: {spec.experiment} (dry run)",
                base=pf.base,
                memory=pf.memory,
            )
            render_changes(pf)
            if pf.ok:  # a plan that cannot run has nothing to power; its error comes first
                render_power(check, reporter)
            for line in pf.notes:
                reporter.notice(line)
            for line in pf.warnings:
                reporter.warning(line)
        if not pf.ok:
            raise pf.error()
        if spec.launch.launcher == "slurm" and trained:  # a SLURM dry run writes the scripts, submits nothing
            submit_slurm(spec, trained, reporter, submit=False)
        return
    start_continue(pf, resume=resume, force=force, resume_from=resume_from, reporter=run_reporter(json_out))


def render_changes(pf: Preflight) -> None:
    """The inputs of the planned evals (ready / built now / missing), then what the continuation changes against the
    base run, one setting a line with the base's value."""
    from rlab.cli.console import out

    if pf.eval_inputs:
        out.print("inputs of the planned evals:", highlight=False)
        for item in pf.eval_inputs:
            out.print(f"  {item.line()}", highlight=False, markup=False, soft_wrap=True)
    if pf.changes and pf.base is not None:
        out.print(f"changed vs the run that trained {pf.base.tag}@{pf.base.step}:", highlight=False)
        for change in pf.changes:
            out.print(f"  {change.line()}", highlight=False, markup=False, soft_wrap=True)


def power_check(spec: ExperimentSpec, l0: int | None) -> PowerCheck:
    """What the planned evals can detect vs `eval.target_mde` (`rlab.report.power.spec`)."""
    from rlab.report.power.spec import check_experiment

    return check_experiment(spec, l0)


def render_power(check: PowerCheck, reporter: Reporter) -> None:
    """The power line, then a warning per underpowered endpoint class."""
    from rlab.cli.console import out

    out.print(check.line(), highlight=False, markup=False, soft_wrap=True)
    for line in check.warnings():
        reporter.warning(line)


def console_reporter(to_stderr: bool = False) -> Reporter:
    """The console reporter; `to_stderr` for --json output, so stdout carries only the JSON."""
    from rlab.cli.console import err, out
    from rlab.cli.reporting import ConsoleReporter

    return ConsoleReporter(out=err if to_stderr else out, err=err)


def run_reporter(as_json: bool) -> Reporter:
    """What a training run reports to: the console, or with --json one JSON object per event on stdout."""
    from rlab.orchestrate.reporter import JsonReporter

    return JsonReporter(emit=typer.echo) if as_json else console_reporter()


def render_plan(
    spec: ExperimentSpec,
    runs: list[RunConfig],
    jobs: list[Job],
    title: str,
    base: BaseInfo | None = None,
    memory: MemoryPlan | None = None,
) -> None:
    """The plan as a table (RoPE with its L0 and factor, seq_len, steps per tag, and on GPUs each job's
    planned peak memory per rank), then each job's exact command.

    What every tag shares (source checkpoint, world size) is one line above the table, so the table fits
    80 columns; the commands are soft-wrapped, never cut, so they can be copied.
    """
    from rich import box
    from rich.table import Table

    from rlab.cli.console import out
    from rlab.orchestrate.control import is_control
    from rlab.orchestrate.plan import experiment_layout

    launch = spec.launch
    sources = list(
        dict.fromkeys(
            f"{r.lineage.parent_tag}@{r.lineage.parent_step}" if r.lineage else "scratch" for r in runs
        )
    )
    out.print(
        f"[bold]{title}[/]: from {', '.join(sources) or '-'}, world {launch.nnodes}x{launch.procs_per_job} "
        f"per job",
        highlight=False,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    table.add_column("tag", no_wrap=True)
    replicated = len(sources) > 1  # train.replicate_base: say which base each tag starts from
    if replicated:
        table.add_column("from", no_wrap=True)
    table.add_column("rope", overflow="fold")
    for column in ("seq", "steps", "tok/step") + (("GiB/rank",) if memory is not None else ()):
        table.add_column(column, justify="right", no_wrap=True)
    for run in runs:
        batch = (
            run.train.total_batch_size or run.train.device_batch_size * run.train.seq_len * launch.world_size
        )
        l0 = run.rope.original_len or (base.sequence_len if base else None)
        rope = run.rope.with_original_len(l0) if l0 else run.rope
        seq = "→".join(str(n) for n in [*(p.seq_len for p in run.train.seq_len_warmup), run.train.seq_len])
        tag = f"{run.tag} (control)" if run.lineage and is_control(spec, run.variant) else run.tag
        cells = [tag, rope.describe(), seq, str(run.train.steps), f"{batch:,}"]
        if replicated:
            cells.insert(1, run.lineage.parent_tag if run.lineage else "scratch")
        if memory is not None:
            cells.append(f"{memory.peak_gib:.1f}" if run.train.steps > 0 else "-")
        table.add_row(*cells)
    out.print(table)
    if memory is not None:
        verdict = "fits" if memory.fits else "[red]does not fit[/]"
        out.print(
            f"memory per rank (`rlab memory`): peak {memory.peak_gib:.1f} GiB of {memory.budget_gib:.1f} usable "
            f"on a {memory.gpu_memory_gib:.0f} GiB GPU: {verdict}",
            highlight=False,
        )
    layout = experiment_layout(spec)
    out.print(f"base dir: {spec.base.base_dir}   results: {layout.root}", highlight=False)
    if base is not None:
        start = runs[0].data_start if runs else None
        out.print(
            f"base {base.tag}@{base.step}: L0={base.sequence_len}; target_len {spec.target_len}; train data "
            f"{start.describe() if start else 'from the beginning'}"
            + ("; each base replicate's tags after that replicate" if replicated and start else ""),
            highlight=False,
        )
    if launch.launcher == "slurm":
        out.print("launcher: slurm (one sbatch script per variant; torchrun inside srun)", highlight=False)
    out.print("Commands:", highlight=False)
    for job in jobs:
        out.print(f"  {job.command()}", highlight=False, markup=False, soft_wrap=True)
