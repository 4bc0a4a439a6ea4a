"""`rlab continue`: clone a base checkpoint once per RoPE variant and continue each under torchrun.

    rlab continue --from-step 21400 --variants pi,ntk,yarn           # d20 in the default base dir
    rlab continue --spec experiments/rope_scaling_d20.yaml --dry-run  # the plan and the exact commands
    rlab continue --spec experiments/demo.yaml --variants ntk --resume

Sequence: resolve spec + flags -> preflight (reads the base step's meta: L0, loader position;
plans every tag and collects every problem, `rlab.orchestrate.preflight`) -> lock the tags ->
clone -> launch -> watch (`rlab.orchestrate.training`). This module parses flags; the plan of a dry run is
rendered by `rlab.cli.plan_view`, the sequence by a reporter (`rlab.cli.reporting`).
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator, rich tables) are local to the functions that use
# them, so `rlab --help` stays fast; the command's signature names only typer and option aliases.
import json
from typing import Annotated, Optional

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
    in_panel,
    number,
    spec_overrides,
    switch,
)

ARMS_PANEL = "Arms"


def continue_training(
    spec_path: SpecOpt = None,
    from_step: Annotated[
        Optional[int], number("--from-step", low=0, help="Base checkpoint step (spec: base.step).")
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
        number("--seq-len", low=1, help="New training length (train.seq_len). (default: --target-len)"),
    ] = None,
    target_len: Annotated[
        Optional[int],
        number(
            "--target-len", low=1, help="Target context (spec: target_len; default 4 x the base's length)."
        ),
    ] = None,
    seeds: Annotated[
        Optional[int],
        number(
            "--seeds",
            low=1,
            panel=ARMS_PANEL,
            help="Training replicates per variant, each with its own data order (train.seeds).",
        ),
    ] = None,
    zero_shot: Annotated[
        Optional[bool],
        in_panel(
            "--zero-shot/--no-zero-shot",
            ARMS_PANEL,
            "Also make each variant's training-free arm (train.zero_shot).",
            metavar="",
        ),
    ] = None,
    control: Annotated[
        bool,
        in_panel(
            "--control/--no-control",
            ARMS_PANEL,
            "Also train the control arm, plain rope continued identically, which every verdict compares with "
            "(added unless named; a --resume keeps the tags already planned).",
            metavar="",
        ),
    ] = True,
    replicate_base: Annotated[
        Optional[bool],
        in_panel(
            "--replicate-base/--one-base",
            ARMS_PANEL,
            "Seed i starts from base replicate i (<base>-seed<i>, `rlab pretrain --seeds S`): the seed "
            "covers pretraining noise too (train.replicate_base).",
            metavar="",
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
        switch(
            "--json",
            help="JSON on stdout: with --dry-run the resolved plan; else one object per event (JSON lines).",
        ),
    ] = False,
    resume: ResumeOpt = False,
    resume_from: Annotated[
        Optional[int],
        number(
            "--resume-from",
            low=0,
            help="With --resume: resume each tag from its own step N; newer checkpoints (a broken one) are "
            "moved to <tag>/set_aside/, not deleted.",
        ),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Clone the base checkpoint once per variant and continue pretraining each under torchrun."""
    flags = dict(locals())  # every flag by its parameter name (nothing else is bound yet)
    from rlab.cli.plan_view import render_changes, render_plan, render_power
    from rlab.cli.reporting import console_reporter, run_reporter
    from rlab.orchestrate.control import with_control
    from rlab.orchestrate.launch import visible_gpus, with_default_nproc
    from rlab.orchestrate.preflight import plan_json, preflight_continue
    from rlab.orchestrate.tag_setup import build_jobs
    from rlab.orchestrate.training import report_preflight, start_continue, submit_slurm
    from rlab.report.power.spec import check_experiment
    from rlab.spec.loading import load_spec

    spec = load_spec(spec_path, **spec_overrides(flags, experiment="name"))
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
        check = check_experiment(spec, pf.base.sequence_len if pf.base else None)
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
            report_preflight(pf, reporter)
        if not pf.ok:
            raise pf.error()
        if spec.launch.launcher == "slurm" and trained:  # a SLURM dry run writes the scripts, submits nothing
            submit_slurm(spec, trained, reporter, submit=False)
        return
    start_continue(pf, resume=resume, force=force, resume_from=resume_from, reporter=run_reporter(json_out))
