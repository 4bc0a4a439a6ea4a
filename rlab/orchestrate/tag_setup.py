"""Between plan and launch: decide what happens to each tag, clone, write run configs, build jobs.

`rlab continue` and `rlab pretrain` share this sequence:

1. `tag_plans` — for each run, clone / resume / replace (an existing tag without --resume or
   --force is an error naming its steps); nothing is touched yet, so the CLI can first say
   what --force will delete.
2. `apply_tag_plans` — delete replaced tags, clone the base step into new ones.
3. `save_resolved_specs`, `write_run_configs` + `build_jobs` — the resolved specs (the
   experiment's, and each tag's own, which its rerun command reads), the run.json files and
   the torchrun jobs that read them.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rlab.atomic_io import remove_stale_temps, write_text_atomic
from rlab.errors import SpecError
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
from rlab.paths import env_base_dir, env_results_root
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.loading import load_spec, spec_yaml
from rlab.spec.run import CheckpointInit, RunConfig, write_config


@dataclass(frozen=True)
class TagPlan:
    """What will happen to one run's tag, and what --force would delete."""

    run: RunConfig
    action: TagAction
    delete: tuple[Path, ...] = ()
    set_aside: tuple[int, ...] = ()
    """Steps of a resumed tag moved to `<tag>/set_aside/` before it resumes (`--resume-from`)."""


def tag_plans(
    spec: ExperimentSpec, runs: list[RunConfig], *, resume: bool, force: bool, resume_from: int | None = None
) -> list[TagPlan]:
    """Decide each tag's fate without touching anything; an existing tag needs --resume or --force."""
    from rlab.orchestrate.resume import steps_to_set_aside  # noqa: PLC0415 - defers numpy, torch

    base, layout = base_layout(spec), experiment_layout(spec)
    plans = []
    for run in runs:
        exists = base.checkpoint_dir(run.tag).exists()
        action = tag_action(exists, resume=resume, force=force)
        if action == "refuse":
            raise tag_exists_error(base, run.tag, run.variant)
        delete = tuple(tag_paths(base, layout, run.tag)) if action == "replace" else ()
        aside: tuple[int, ...] = ()
        if action == "resume" and resume_from is not None:
            aside = tuple(steps_to_set_aside(base.checkpoint_dir(run.tag), resume_from))
        plans.append(TagPlan(run, action, delete, aside))
    return plans


def apply_tag_plans(
    spec: ExperimentSpec, plans: list[TagPlan], *, method: CloneMethod = "auto"
) -> list[RunConfig]:
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
            remove_stale_temps(
                base.checkpoint_dir(run.tag)
            )  # a save killed mid-write (the tag's lock is ours)
            if plan.set_aside:
                from rlab.orchestrate.resume import set_aside  # noqa: PLC0415 - defers numpy, torch

                set_aside(base.checkpoint_dir(run.tag), list(plan.set_aside))
            out.append(run.model_copy(update={"resume": True}))
            continue
        if isinstance(run.init, CheckpointInit) and run.lineage is not None:
            # a training-free arm takes the target length now; a trained one when its training starts
            clone_checkpoint(
                base,
                run.lineage.parent_tag,
                run.lineage.parent_step,
                run.tag,
                rope=run.rope,
                variant=run.variant,
                method=method,
                experiment=run.experiment,
                sequence_len=run.train.seq_len if run.train.steps == 0 else None,
            )
        out.append(run)
    return out


def save_resolved_specs(spec: ExperimentSpec, runs: list[RunConfig]) -> Path:
    """Write the experiment's resolved spec (keeping variants an earlier run of it saved) and each run's own.

    A tag's own spec (`runs/<tag>/spec.resolved.yaml`) holds just its variant, as this run trains it;
    a later run of other variants overwrites the experiment-wide file, never it.
    """

    layout = experiment_layout(spec)
    path = layout.resolved_spec
    merged = spec
    if path.exists():
        try:
            previous = load_spec(path, resolve=False)
        except SpecError:  # an unreadable or outdated old file (load_spec says so as SpecError) is replaced
            previous = None
        if previous is not None and previous.variants:
            merged = spec.model_copy(update={"variants": {**previous.variants, **spec.variants}})
    write_text_atomic(path, spec_yaml(merged))
    for run in runs:
        own = spec.model_copy(
            update={"variants": {run.variant: spec.variants.get(run.variant, run.rope)}}
        )  # pretrain: rope
        write_text_atomic(layout.tag_spec(run.tag), spec_yaml(own))
    return path


def with_saved_variants(spec: ExperimentSpec) -> ExperimentSpec:
    """`spec` plus the variants its experiment's saved resolved spec lists (those given with --variants
    on an earlier `rlab continue`), so `rlab eval --all --spec S` finds every trained variant."""

    path = experiment_layout(spec).resolved_spec
    if not path.exists():
        return spec
    try:
        saved = load_spec(path, resolve=False)
    except SpecError:  # an unreadable or outdated saved spec adds nothing
        return spec
    return spec.model_copy(update={"variants": {**saved.variants, **spec.variants}})


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
        jobs.append(
            Job(
                tag=run.tag,
                variant=run.variant,
                argv=tuple(argv),
                log=layout.train_log(run.tag),
                metrics=layout.metrics_file(run.tag),
                env=dict(spec.launch.env),
                heartbeats=layout.heartbeat_dir(run.tag),
                error_file=Path(tempfile.gettempdir()) / f"rlab-{os.getpid()}-{run.tag}.error.json",
            )
        )
    return jobs


def rerun_command(spec: ExperimentSpec, variants: list[str]) -> str:
    """The command that resumes `variants` with the settings their tags were trained with.

    One variant: its tag's own resolved spec (runs/<tag>/spec.resolved.yaml), which no other run
    overwrites; several: the experiment's resolved spec. Paths the environment would override
    (it beats recorded paths) are given as flags, so the command works as printed.
    """

    layout = experiment_layout(spec)
    path = layout.tag_spec(spec.tag_for(variants[0])) if len(variants) == 1 else layout.resolved_spec
    flags = ""
    if env_base_dir() not in (None, spec.base.base_dir):
        flags += f" --base-dir {spec.base.base_dir}"
    if env_results_root() not in (None, spec.results_dir):
        flags += f" --results-dir {spec.results_dir}"
    return f"rlab continue --spec {path} --variants {','.join(variants)} --resume{flags}"
