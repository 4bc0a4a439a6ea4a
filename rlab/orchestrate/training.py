"""The training sequence of `rlab continue` and `rlab pretrain`: clone -> lock -> launch -> watch.

    start_continue(preflight, resume=False, force=False, reporter=SilentReporter())
    start_pretrain(spec, runs, resume=False, force=False, reporter=SilentReporter())

After the preflight (`rlab.orchestrate.preflight`) found nothing in the way: decide each tag's fate
(`tag_setup.tag_plans`), take the tags' locks, clone, write the resolved specs and run configs, then run
the torchrun jobs (or submit them to SLURM) and watch their metrics until they end. What happens is
told to a `Reporter`; a failure or an interrupt is raised as an `RlabError` whose hint is the command
that resumes exactly the unfinished tags.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from rlab.errors import Interrupted, LaunchError
from rlab.orchestrate.base_changes import changed_summary
from rlab.orchestrate.clone import describe_paths
from rlab.orchestrate.launch import Job, JobState, device_slots, resolve_program, run_jobs, visible_gpus
from rlab.orchestrate.lock import TagLocks
from rlab.orchestrate.plan import base_layout, experiment_layout
from rlab.orchestrate.preflight import Preflight
from rlab.orchestrate.reporter import JobFailure, Reporter
from rlab.orchestrate.slurm import sbatch_script, write_script
from rlab.orchestrate.slurm import submit as sbatch
from rlab.orchestrate.tag_setup import TagPlan, rerun_command
from rlab.orchestrate.watch import MetricsTail, launcher_signal, tail_lines, worker_error
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.run import RunConfig

LOG_TAIL_LINES = 15
RerunFn = Callable[[list[str]], str]
"""The command that resumes the given variants."""


def start_continue(
    pf: Preflight, *, resume: bool, force: bool, reporter: Reporter, resume_from: int | None = None
) -> list[JobState]:
    """`rlab continue` after its preflight: the base line, then the tags cloned, trained and watched
    (`resume_from`: resumed tags restart from that step, their newer checkpoints set aside)."""
    from rlab.orchestrate.eval_inputs import prepare_eval_inputs  # noqa: PLC0415 - defers numpy
    from rlab.orchestrate.tag_setup import tag_plans  # noqa: PLC0415 - defers numpy, torch

    spec, runs = pf.spec, pf.runs
    report_preflight(pf, reporter)
    if pf.base is not None:
        reporter.notice(
            f"base {pf.base.tag}@{pf.base.step}: L0={pf.base.sequence_len}, target {spec.target_len}; "
            f"train data {data_start_text(runs)}"
        )
    if summary := changed_summary(pf.changes):
        reporter.notice(summary)
    for line in prepare_eval_inputs(
        spec, pf.eval_inputs
    ):  # before any clone: an eval never stops on them later
        reporter.notice(line)
    plans = tag_plans(spec, runs, resume=resume, force=force, resume_from=resume_from)
    return train_tags(spec, plans, reporter, rerun=lambda names: rerun_command(spec, names))


def report_preflight(pf: Preflight, reporter: Reporter) -> None:
    """The preflight's notes and warnings; then its error, if it found one."""
    for line in pf.notes:
        reporter.notice(line)
    for line in pf.warnings:
        reporter.warning(line)
    if not pf.ok:
        raise pf.error()


def start_pretrain(
    spec: ExperimentSpec, runs: list[RunConfig], *, resume: bool, force: bool, reporter: Reporter
) -> list[JobState]:
    """`rlab pretrain`: the base tag (and its replicates) trained from scratch through the same sequence."""
    from rlab.orchestrate.tag_setup import tag_plans  # noqa: PLC0415 - defers numpy, torch

    plans = tag_plans(spec, runs, resume=resume, force=force)
    resolved = experiment_layout(spec).resolved_spec.resolve()
    return train_tags(spec, plans, reporter, rerun=lambda _names: f"rlab pretrain --spec {resolved} --resume")


def data_start_text(runs: Sequence[RunConfig]) -> str:
    """Where the runs' train data starts, in words."""
    start = runs[0].data_start if runs else None
    return start.describe() if start is not None else "from the beginning"


def train_tags(
    spec: ExperimentSpec, plans: list[TagPlan], reporter: Reporter, rerun: RerunFn
) -> list[JobState]:
    """Apply tag plans under the tags' locks, write configs and the resolved specs, then launch and watch
    (local) or submit (SLURM). Returns every local job's final state."""
    from rlab.orchestrate.tag_setup import build_jobs  # noqa: PLC0415 - defers numpy, torch

    launch = spec.launch
    torchrun = None if launch.launcher == "slurm" else resolve_program(launch.torchrun)
    slots = device_slots(launch, visible_gpus()) if launch.launcher == "local" else [None]
    for plan in plans:
        if plan.delete:
            reporter.notice(f"--force: deleting {plan.run.tag}:")
            for line in describe_paths(list(plan.delete)):
                reporter.notice(f"  {line}")
        if plan.set_aside:
            steps = ", ".join(map(str, plan.set_aside))
            reporter.notice(
                f"--resume-from: {plan.run.tag} resumes before step(s) {steps}, which are set aside"
            )
    if launch.launcher == "slurm":  # the jobs run elsewhere: no local lock outlives this process
        runs = prepare_runs(spec, plans, reporter)
        if runs:
            submit_slurm(spec, runs, reporter)
        return []
    with TagLocks(base_layout(spec), [p.run.tag for p in plans]) as locks:
        runs = prepare_runs(spec, plans, reporter)
        if not runs:
            return []
        jobs = [
            replace(job, env={**job.env, **locks.env(job.tag)})  # its workers count as holding the tag
            for job in build_jobs(spec, runs, torchrun=torchrun)
        ]
        return launch_and_watch(
            spec, jobs, slots, reporter, rerun, keep_fds={run.tag: locks.fd(run.tag) for run in runs}
        )


_VERBS = {"clone": "cloned from", "replace": "re-cloned from", "resume": "resuming"}
_SCRATCH_VERBS = {"clone": "new", "replace": "replaced, training from scratch", "resume": "resuming"}


def prepare_runs(spec: ExperimentSpec, plans: list[TagPlan], reporter: Reporter) -> list[RunConfig]:
    """Delete/clone the tags, say what happened to each, write the resolved specs and run configs;
    returns the runs that train (a training-free arm is its clone)."""
    from rlab.orchestrate.tag_setup import apply_tag_plans, save_resolved_specs, write_run_configs  # noqa: PLC0415 - defers numpy, torch

    runs = apply_tag_plans(spec, plans)
    for plan, run in zip(plans, runs):
        if run.lineage is None:  # a from-scratch run (`rlab pretrain`): nothing is cloned
            reporter.info(f"{run.tag}: {_SCRATCH_VERBS[plan.action]}")
        elif plan.action == "resume":
            reporter.info(f"{run.tag}: resuming")
        else:
            reporter.info(
                f"{run.tag}: {_VERBS[plan.action]} {run.lineage.parent_tag}@{run.lineage.parent_step}"
            )
    save_resolved_specs(spec, runs)
    write_run_configs(spec, runs)
    for run in runs:
        if run.train.steps == 0:
            reporter.info(
                f"{run.tag}: training-free arm ({run.variant}'s RoPE on the base at {run.train.seq_len} "
                "tokens, nothing trained; no job)"
            )
    return [run for run in runs if run.train.steps > 0]


def launch_and_watch(
    spec: ExperimentSpec,
    jobs: list[Job],
    slots: Sequence[tuple[str, ...] | None],
    reporter: Reporter,
    rerun: RerunFn,
    keep_fds: dict[str, int | None] | None = None,
) -> list[JobState]:
    """Run the jobs and report their progress; then their summary, each failure's reason, and what is next.

    An interrupt (Ctrl-C, or SIGTERM turned into one by the CLI) stops every job before it is raised
    as a `LaunchError` naming the command that resumes the unfinished ones.
    """

    tails = {job.tag: MetricsTail(job.metrics) for job in jobs}
    where = (
        "concurrently on " + ", ".join(",".join(s) for s in slots if s) if len(slots) > 1 else "one at a time"
    )
    layout = experiment_layout(spec)
    reporter.info(f"Launching {len(jobs)} job(s) {where}; logs in {layout.root / 'runs'}/<tag>/train.log")
    states: list[JobState] = []
    interrupted: Interrupted | None = None
    fds = {tag: fd for tag, fd in (keep_fds or {}).items() if fd is not None}
    with reporter.watching() as tick:

        def on_tick(current: list[JobState]) -> None:
            states[:] = current
            tick(current, {tag: t.poll() for tag, t in tails.items()})

        try:
            run_jobs(jobs, slots, on_tick=on_tick, keep_fds=fds)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (rlab.errors.Terminated)
            stopped = [s.job.variant for s in states if s.state in ("interrupted", "pending")]
            interrupted = Interrupted(
                f"Interrupted: stopped every job (no processes left). Unfinished: {', '.join(stopped) or 'none'}.",
                f"Resume with: {rerun(stopped)}" if stopped else None,
                cause=exc,
            )
    if interrupted is not None:
        raise interrupted
    reporter.jobs_ended(states)
    failed = [s for s in states if s.state != "done"]
    failures = [job_failure(s) for s in failed]
    for failure in failures:
        reporter.job_failed(failure)
    if failed:
        first = failures[0]
        raise LaunchError(
            f"{len(failed)} of {len(states)} job(s) failed: {', '.join(s.job.tag for s in failed)}; "
            f"log: {first.log}." + (f"\n{first.tag}: {first.reason}" if first.reason else ""),
            "Rerun just these with:\n" + "\n".join(f"  {rerun([s.job.variant])}" for s in failed),
        )
    reporter.next_step(f"rlab eval --spec {layout.resolved_spec} --all")
    return states


def job_failure(state: JobState) -> JobFailure:
    """What a failed job's log says: its own reason and its last lines."""

    return JobFailure(
        tag=state.job.tag,
        returncode=state.returncode,
        log=state.job.log,
        reason=state.stalled
        or launcher_signal(state.returncode)
        or state.reported
        or worker_error(state.job.log),
        tail=tail_lines(state.job.log, LOG_TAIL_LINES),
    )


def submit_slurm(
    spec: ExperimentSpec, runs: list[RunConfig], reporter: Reporter, *, submit: bool = True
) -> list[Path]:
    """Write one sbatch script per run (and submit each unless `submit` is False)."""

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
            reporter.info(
                f"{run.tag}: submitted SLURM job {job_id} ({path}); log: {layout.train_log(run.tag)}"
            )
        else:
            reporter.info(f"{run.tag}: wrote {path}")
    return scripts
