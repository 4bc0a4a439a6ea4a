"""Between plan and launch: decide what happens to each tag, clone, write run configs, build jobs.

`rlab continue` and `rlab pretrain` share this sequence:

1. `tag_plans` — for each run, clone / resume / replace (an existing tag without --resume or
   --force is an error naming its steps); nothing is touched yet, so the CLI can first say
   what --force will delete.
2. `apply_tag_plans` — delete replaced tags, clone the base step into new ones.
3. `write_run_configs` + `build_jobs` — the run.json files and the torchrun jobs that read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlab.orchestrate.clone import (
    CloneMethod,
    TagAction,
    clone_checkpoint,
    remove_paths,
    tag_action,
    tag_exists_error,
    tag_paths,
)
from rlab.orchestrate.launch import Job, torchrun_argv
from rlab.orchestrate.plan import base_layout, experiment_layout
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.run import CheckpointInit, RunConfig, write_config


@dataclass(frozen=True)
class TagPlan:
    """What will happen to one run's tag, and what --force would delete."""

    run: RunConfig
    action: TagAction
    delete: tuple[Path, ...] = ()


def tag_plans(spec: ExperimentSpec, runs: list[RunConfig], *, resume: bool, force: bool) -> list[TagPlan]:
    """Decide each tag's fate without touching anything; an existing tag needs --resume or --force."""
    base, layout = base_layout(spec), experiment_layout(spec)
    plans = []
    for run in runs:
        exists = base.checkpoint_dir(run.tag).exists()
        action = tag_action(exists, resume=resume, force=force)
        if action == "refuse":
            raise tag_exists_error(base, run.tag, run.variant)
        delete = tuple(tag_paths(base, layout, run.tag)) if action == "replace" else ()
        plans.append(TagPlan(run, action, delete))
    return plans


def apply_tag_plans(spec: ExperimentSpec, plans: list[TagPlan], *, method: CloneMethod = "auto") -> list[RunConfig]:
    """Carry the plans out; returns the runs to launch (resumed ones with ``resume: true``).

    A run that starts from a checkpoint gets that checkpoint cloned into its tag first; a
    from-scratch run (pretrain) has nothing to clone.
    """
    base = base_layout(spec)
    out = []
    for plan in plans:
        run = plan.run
        if plan.action == "replace":
            remove_paths(list(plan.delete))
        if plan.action == "resume":
            out.append(run.model_copy(update={"resume": True}))
            continue
        if isinstance(run.init, CheckpointInit) and run.lineage is not None:
            clone_checkpoint(base, run.lineage.parent_tag, run.lineage.parent_step, run.tag, rope=run.rope,
                             variant=run.variant, method=method)
        out.append(run)
    return out


def write_run_configs(spec: ExperimentSpec, runs: list[RunConfig]) -> list[Path]:
    """Write each run's run.json; returns their paths."""
    layout = experiment_layout(spec)
    paths = []
    for run in runs:
        path = layout.run_config(run.tag)
        write_config(run, path)
        paths.append(path)
    return paths


def build_jobs(spec: ExperimentSpec, runs: list[RunConfig], *, torchrun: str | None = None) -> list[Job]:
    """One torchrun job per run; the i-th uses rendezvous port rdzv_port + i."""
    layout = experiment_layout(spec)
    launch = spec.launch if torchrun is None else spec.launch.model_copy(update={"torchrun": torchrun})
    jobs = []
    for index, run in enumerate(runs):
        argv = torchrun_argv(layout.run_config(run.tag), launch, index=index, rdzv_id=run.tag)
        jobs.append(Job(tag=run.tag, variant=run.variant, argv=tuple(argv), log=layout.train_log(run.tag),
                        metrics=layout.metrics_file(run.tag), env=dict(spec.launch.env)))
    return jobs
