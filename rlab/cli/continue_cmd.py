"""`rlab continue`: clone a base checkpoint once per RoPE variant and continue each under torchrun.

    rlab continue --from-step 21400 --variants pi,ntk,yarn           # d20 in the default base dir
    rlab continue --spec experiments/rope_scaling_d20.yaml --dry-run  # the plan and the exact commands
    rlab continue --spec experiments/demo.yaml --variants ntk --resume

Sequence: resolve spec + flags -> preflight (reads the base step's meta: L0, loader position;
plans every tag and collects every problem, `rlab.orchestrate.preflight`) -> lock the tags ->
clone -> launch -> watch. The helpers below (`execute`, `render_plan`) are shared with `rlab pretrain`.
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator, rich tables) are local to the functions that use
# them, so `rlab --help` stays fast; the command's signature names only typer and option aliases.
import signal
import time
from pathlib import Path
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
from rlab.errors import LaunchError

if TYPE_CHECKING:
    from rlab.orchestrate.base_info import BaseInfo
    from rlab.orchestrate.launch import Job, JobState
    from rlab.orchestrate.prepare import TagPlan
    from rlab.spec.experiment import ExperimentSpec
    from rlab.spec.run import RunConfig

LOG_TAIL_LINES = 15


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
    nproc: NprocOpt = None,
    max_restarts: MaxRestartsOpt = None,
    gpus_per_variant: GpusPerVariantOpt = None,
    nnodes: NnodesOpt = None,
    node_rank: NodeRankOpt = None,
    rdzv_endpoint: RdzvEndpointOpt = None,
    launcher: LauncherOpt = None,
    dry_run: DryRunOpt = False,
    json_out: Annotated[
        bool, typer.Option("--json", metavar="", help="With --dry-run: the resolved plan as JSON on stdout.")
    ] = False,
    resume: ResumeOpt = False,
    force: ForceOpt = False,
) -> None:
    """Clone the base checkpoint once per variant and continue pretraining each under torchrun."""
    from rlab.cli.console import err
    from rlab.orchestrate.launch import visible_gpus, with_default_nproc
    from rlab.orchestrate.preflight import plan_json, preflight_continue
    from rlab.orchestrate.prepare import build_jobs, tag_plans
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
    pf = preflight_continue(spec, resume=resume, force=force)
    spec, runs = pf.spec, pf.runs
    if json_out and not dry_run:
        raise typer.BadParameter(
            "--json goes with --dry-run (the plan as JSON; nothing runs).", param_hint="--json"
        )
    if dry_run:
        trained = [run for run in runs if run.train.steps > 0]  # training-free arms are a clone, not a job
        jobs = build_jobs(spec, trained)
        if json_out:
            import json

            typer.echo(json.dumps(plan_json(pf, jobs), indent=2))
        else:
            render_plan(spec, runs, jobs, title=f"rlab continue: {spec.experiment} (dry run)", base=pf.base)
            render_findings(pf.warnings)
        if not pf.ok:
            raise pf.error()
        if spec.launch.launcher == "slurm" and trained:  # a SLURM dry run writes the scripts, submits nothing
            submit_slurm(spec, trained, submit=False)
        return
    render_findings(pf.warnings)
    if not pf.ok:
        raise pf.error()
    if pf.base is not None:
        err.print(
            f"base {pf.base.tag}@{pf.base.step}: L0={pf.base.sequence_len}, target {spec.target_len}; "
            f"train data {_data_start_text(runs)}",
            highlight=False,
        )
    plans = tag_plans(spec, runs, resume=resume, force=force)
    execute(spec, plans, rerun=lambda names: rerun_command(spec, names))


def render_findings(warnings: list[str]) -> None:
    """Warnings of the preflight, one line each, on stderr."""
    from rlab.cli.console import err

    for line in warnings:
        err.print(f"[yellow]warning:[/] {line}", highlight=False)


def _data_start_text(runs: list[RunConfig]) -> str:
    start = runs[0].data_start if runs else None
    return start.describe() if start is not None else "from the beginning"


def execute(spec: ExperimentSpec, plans: list[TagPlan], rerun) -> None:
    """Apply tag plans, write configs and the resolved spec, then launch locally or via SLURM."""
    from rlab.cli.console import err
    from rlab.orchestrate.clone import describe_paths
    from rlab.orchestrate.launch import device_slots, resolve_program, visible_gpus
    from rlab.orchestrate.lock import TagLocks
    from rlab.orchestrate.plan import base_layout
    from rlab.orchestrate.prepare import build_jobs

    launch = spec.launch
    torchrun = None if launch.launcher == "slurm" else resolve_program(launch.torchrun)
    slots = device_slots(launch, visible_gpus()) if launch.launcher == "local" else [None]
    for plan in plans:
        if plan.delete:
            err.print(f"[yellow]--force: deleting {plan.run.tag}:[/]")
            for line in describe_paths(list(plan.delete)):
                err.print(f"  {line}", highlight=False)
    if launch.launcher == "slurm":  # the jobs run elsewhere: no local lock outlives this process
        runs = _prepare(spec, plans)
        if runs:
            submit_slurm(spec, runs)
        return
    with TagLocks(base_layout(spec), [p.run.tag for p in plans]) as locks:
        runs = _prepare(spec, plans)
        if runs:
            jobs = build_jobs(spec, runs, torchrun=torchrun)
            launch_and_watch(spec, jobs, slots, rerun, keep_fds={run.tag: locks.fd(run.tag) for run in runs})


def _prepare(spec: ExperimentSpec, plans: list[TagPlan]) -> list[RunConfig]:
    """Delete/clone the tags, say what happened to each, write the resolved specs and run configs."""
    from rlab.cli.console import out
    from rlab.orchestrate.prepare import apply_tag_plans, save_resolved_specs, write_run_configs

    runs = apply_tag_plans(spec, plans)
    for plan, run in zip(plans, runs):
        verb = {"clone": "cloned from", "replace": "re-cloned from", "resume": "resuming"}[plan.action]
        source = (
            f" {run.lineage.parent_tag}@{run.lineage.parent_step}"
            if run.lineage and verb != "resuming"
            else ""
        )
        if run.lineage is None:  # a from-scratch run (`rlab pretrain`): nothing is cloned
            verb, source = (
                {"clone": "new", "replace": "replaced, training from scratch", "resume": "resuming"}[
                    plan.action
                ],
                "",
            )
        out.print(f"{run.tag}: {verb}{source}", highlight=False)
    save_resolved_specs(spec, runs)
    write_run_configs(spec, runs)
    for run in runs:
        if run.train.steps == 0:
            out.print(
                f"{run.tag}: training-free arm ({run.variant}'s RoPE on the base at {run.train.seq_len} "
                "tokens, nothing trained; no job)",
                highlight=False,
            )
    return [run for run in runs if run.train.steps > 0]


def launch_and_watch(spec: ExperimentSpec, jobs: list[Job], slots, rerun, keep_fds=None) -> list[JobState]:
    """Run jobs with a live table; summary at the end; Ctrl-C stops every job and says how to resume."""
    from rich.live import Live

    from rlab.cli.console import out
    from rlab.orchestrate.launch import run_jobs
    from rlab.orchestrate.plan import experiment_layout
    from rlab.orchestrate.watch import MetricsTail, progress_table

    tails = {job.tag: MetricsTail(job.metrics) for job in jobs}
    where = (
        "concurrently on " + ", ".join(",".join(s) for s in slots if s) if len(slots) > 1 else "one at a time"
    )
    out.print(
        f"Launching {len(jobs)} job(s) {where}; logs in {experiment_layout(spec).root / 'runs'}/<tag>/train.log",
        highlight=False,
    )
    previous = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    states: list[JobState] = []
    try:
        with Live(progress_table([], {}), console=out, refresh_per_second=2, transient=False) as live:

            def tick(current: list[JobState]) -> None:
                states[:] = current
                live.update(progress_table(current, {tag: t.poll() for tag, t in tails.items()}))

            try:
                run_jobs(jobs, slots, on_tick=tick, keep_fds=keep_fds)
            except KeyboardInterrupt:
                live.stop()
                stopped = [s.job.variant for s in states if s.state in ("interrupted", "pending")]
                raise LaunchError(
                    f"Interrupted: stopped every job (no processes left). Unfinished: {', '.join(stopped) or 'none'}.",
                    f"Resume with: {rerun(stopped)}" if stopped else None,
                ) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    out.line()
    _summary(states, rerun)
    out.print(
        f"next: rlab eval --spec {experiment_layout(spec).resolved_spec} --all",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return states


def _sigterm_to_interrupt(signum, frame) -> None:  # noqa: ARG001
    raise KeyboardInterrupt


def _summary(states: list[JobState], rerun) -> None:
    from rich.table import Table

    from rlab.cli.console import err, out
    from rlab.orchestrate.watch import tail_lines, worker_error

    table = Table(title="Summary", title_justify="left")
    for column in ("variant", "tag", "state", "exit", "time", "log"):
        table.add_column(column)
    for s in states:
        seconds = s.seconds
        table.add_row(
            s.job.variant,
            s.job.tag,
            s.state,
            "-" if s.returncode is None else str(s.returncode),
            "-" if seconds is None else time.strftime("%H:%M:%S", time.gmtime(seconds)),
            str(s.job.log),
        )
    out.print(table)
    failed = [s for s in states if s.state != "done"]
    for s in failed:
        own = worker_error(s.job.log)
        if own:
            err.print(f"[red]── {s.job.tag} failed (exit {s.returncode}):[/] {own}", highlight=False)
        err.print(f"[red]── last lines of {s.job.log}:[/]", highlight=False)
        for line in tail_lines(s.job.log, LOG_TAIL_LINES):
            err.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    if failed:
        first = worker_error(failed[0].job.log)
        raise LaunchError(
            f"{len(failed)} of {len(states)} job(s) failed: {', '.join(s.job.tag for s in failed)}; "
            f"log: {failed[0].job.log}." + (f"\n{failed[0].job.tag}: {first}" if first else ""),
            "Rerun just these with:\n" + "\n".join(f"  {rerun([s.job.variant])}" for s in failed),
        )


def rerun_command(spec: ExperimentSpec, variants: list[str]) -> str:
    """The command that resumes `variants` with the settings their tags were trained with.

    One variant: its tag's own resolved spec (runs/<tag>/spec.resolved.yaml), which no other run
    overwrites; several: the experiment's resolved spec. Paths the environment would override
    (it beats recorded paths) are given as flags, so the command works as printed.
    """
    from rlab.orchestrate.plan import experiment_layout
    from rlab.paths import env_base_dir, env_results_root

    layout = experiment_layout(spec)
    path = layout.tag_spec(spec.tag_for(variants[0])) if len(variants) == 1 else layout.resolved_spec
    flags = ""
    if env_base_dir() not in (None, spec.base.base_dir):
        flags += f" --base-dir {spec.base.base_dir}"
    if env_results_root() not in (None, spec.results_dir):
        flags += f" --results-dir {spec.results_dir}"
    return f"rlab continue --spec {path} --variants {','.join(variants)} --resume{flags}"


def render_plan(
    spec: ExperimentSpec, runs: list[RunConfig], jobs: list[Job], title: str, base: BaseInfo | None = None
) -> None:
    """The plan as a table (RoPE with its L0 and factor, seq_len, steps per tag), then each job's exact command.

    What every tag shares (source checkpoint, world size) is one line above the table, so the table fits
    80 columns; the commands are soft-wrapped, never cut, so they can be copied.
    """
    from rich import box
    from rich.table import Table

    from rlab.cli.console import out
    from rlab.orchestrate.plan import experiment_layout

    launch = spec.launch
    sources = sorted(
        {f"{r.lineage.parent_tag}@{r.lineage.parent_step}" if r.lineage else "scratch" for r in runs}
    )
    out.print(
        f"[bold]{title}[/]: from {', '.join(sources) or '-'}, world {launch.nnodes}x{launch.procs_per_job} "
        f"per job",
        highlight=False,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    table.add_column("tag", no_wrap=True)
    table.add_column("rope", overflow="fold")
    for column in ("seq", "steps", "tok/step"):
        table.add_column(column, justify="right", no_wrap=True)
    for run in runs:
        batch = (
            run.train.total_batch_size or run.train.device_batch_size * run.train.seq_len * launch.world_size
        )
        l0 = run.rope.original_len or (base.sequence_len if base else None)
        rope = run.rope.with_original_len(l0) if l0 else run.rope
        seq = "→".join(str(n) for n in [*(p.seq_len for p in run.train.seq_len_warmup), run.train.seq_len])
        table.add_row(run.tag, rope.describe(), seq, str(run.train.steps), f"{batch:,}")
    out.print(table)
    layout = experiment_layout(spec)
    out.print(f"base dir: {spec.base.base_dir}   results: {layout.root}", highlight=False)
    if base is not None:
        start = runs[0].data_start if runs else None
        out.print(
            f"base {base.tag}@{base.step}: L0={base.sequence_len}; target_len {spec.target_len}; train data "
            f"{start.describe() if start else 'from the beginning'}",
            highlight=False,
        )
    if launch.launcher == "slurm":
        out.print("launcher: slurm (one sbatch script per variant; torchrun inside srun)", highlight=False)
    out.print("Commands:", highlight=False)
    for job in jobs:
        out.print(f"  {job.command()}", highlight=False, markup=False, soft_wrap=True)


def submit_slurm(spec: ExperimentSpec, runs: list[RunConfig], *, submit: bool = True) -> list[Path]:
    """Write one sbatch script per run (and submit each unless `submit` is False)."""
    import os

    from rlab.cli.console import out
    from rlab.orchestrate.launch import resolve_program
    from rlab.orchestrate.plan import experiment_layout
    from rlab.orchestrate.slurm import sbatch_script, write_script
    from rlab.orchestrate.slurm import submit as sbatch

    layout = experiment_layout(spec)
    try:
        torchrun = resolve_program(spec.launch.torchrun)
    except LaunchError:
        torchrun = spec.launch.torchrun  # resolved on the compute node
    scripts = []
    for index, run in enumerate(runs):
        text = sbatch_script(
            tag=run.tag,
            config_path=layout.run_config(run.tag),
            log_path=layout.train_log(run.tag),
            launch=spec.launch,
            index=index,
            torchrun=torchrun,
            workdir=Path(os.getcwd()),
        )
        path = write_script(layout.sbatch_script(run.tag), text)
        scripts.append(path)
        if submit:
            job_id = sbatch(path)
            out.print(
                f"{run.tag}: submitted SLURM job {job_id} ({path}); log: {layout.train_log(run.tag)}",
                highlight=False,
            )
        else:
            out.print(f"{run.tag}: wrote {path}", highlight=False)
    return scripts
