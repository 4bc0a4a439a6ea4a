"""Everything `rlab continue` would trip over, found before anything is cloned or launched.

`preflight_continue` reads the base step's meta (L0, loader position), plans every tag from it
and collects *all* fatal problems at once (missing base tag or step, a base of an architecture rlab
does not know or cannot read, taken or locked tags,
batch arithmetic, an unwritable results dir, too little disk, a missing launcher) plus
warnings (lengths that contradict the experiment, no recorded data position, missing data or
eval bundle). `rlab continue` refuses to start while `problems` is non-empty; `--dry-run` and
`rlab validate` print the same findings and exit non-zero on a problem.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.core.checkpoint_meta import newest_meta
from rlab.errors import CheckpointError, LaunchError, RlabError
from rlab.evals.core.bundle import check_task_selection
from rlab.orchestrate.base_changes import Change, base_changes
from rlab.orchestrate.base_info import BaseInfo, read_base_info
from rlab.orchestrate.clone import (
    require_checkpoint,
    tag_action,
    tag_exists_error,
)
from rlab.orchestrate.control import is_control
from rlab.orchestrate.disk import plan_disk
from rlab.orchestrate.eval_inputs import EvalInput, eval_inputs
from rlab.orchestrate.launch import device_slots, resolve_program, visible_gpus
from rlab.orchestrate.lock import lock_holder
from rlab.orchestrate.plan import (
    base_layout,
    base_tags,
    check_batch,
    experiment_layout,
    length_warnings,
    plan_continue,
    resolve_lengths,
)
from rlab.paths import BaseLayout, meta_file
from rlab.spec.experiment import ExperimentSpec

if TYPE_CHECKING:
    from rlab.core.checkpoint import CheckpointInfo
    from rlab.memory.plan import MemoryPlan
    from rlab.spec.run import RunConfig


@dataclass
class Preflight:
    """The resolved plan of one `rlab continue` and what stands in its way."""

    spec: ExperimentSpec
    base: BaseInfo | None = None
    runs: list[RunConfig] = field(default_factory=list)
    errors: list[RlabError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the run adjusts and says (a resume at another world size keeping its global batch)."""
    eval_inputs: list[EvalInput] = field(default_factory=list)
    """What the planned evals read (long-document set, CORE bundle): ready, to be built now, or missing."""
    changes: list[Change] = field(default_factory=list)
    """The plan's lengths, batch, steps, LR schedule and optimizer source beside the base run's."""
    memory: MemoryPlan | None = None
    """The per-rank memory plan of a GPU launch (None on a CPU launch, or with no base to plan from)."""

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def problems(self) -> list[str]:
        """Every fatal problem, one line each (message and hint)."""
        return [e.message + (f" {e.hint}" if e.hint else "") for e in self.errors]

    def problem(self, exc: RlabError | str) -> None:
        self.errors.append(exc if isinstance(exc, RlabError) else LaunchError(exc))

    def error(self) -> RlabError:
        """The one problem as raised, or one error listing them all (what `continue` raises, a dry run exits with)."""
        if len(self.errors) == 1:
            return self.errors[0]
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return RlabError(
            f"{len(self.problems)} problems stop this run:\n{lines}",
            "Fix them; `--dry-run` (or `rlab validate SPEC`) checks again without starting anything.",
        )


def preflight_continue(
    spec: ExperimentSpec,
    *,
    resume: bool = False,
    force: bool = False,
    base_made_by_pretrain: bool = False,
    launching: bool = False,
    resume_from: int | None = None,
) -> Preflight:
    """Plan `spec` against the base dir and collect every problem; `spec` is resolved (load_spec).

    With `base_made_by_pretrain` (rlab validate of a spec whose `pretrain:` makes the base), a
    missing base checkpoint is expected, not a problem. The inputs the workers read are opened
    (`rlab.orchestrate.inputs`): what is wrong with them stops a launch (`launching`) and is a
    warning for a dry run or `rlab validate` (a base dir may get its data later).
    """
    pf = Preflight(spec)
    base, layout = base_layout(spec), experiment_layout(spec)
    step = spec.base_step
    replicas, info = _read_base(pf, base, base_made_by_pretrain=base_made_by_pretrain)
    if pf.base is not None:
        spec = pf.spec = resolve_lengths(spec, pf.base)
        if info is not None:
            from rlab.core.rope_geometry import plan_geometry_warnings  # noqa: PLC0415 - defers numpy

            pf.warnings += plan_geometry_warnings(spec, info.config)
    try:
        check_batch(spec.train, spec.launch.world_size)
    except RlabError as exc:
        pf.problem(exc)
    try:
        pf.runs = plan_continue(spec, pf.base, check=False, replicas=replicas)
    except RlabError as exc:
        pf.problem(exc)
        return pf
    if pf.base is not None:
        _base_notes(pf, base, pf.base)
    _check_tags(pf, resume=resume, force=force)
    if resume and pf.base is not None:
        _adjust_resumed_batches(pf)
    _check_results_dir(pf, layout.root)
    if pf.base is not None:
        _check_disk(pf, base.checkpoint_dir(spec.base.tag), step, resume=resume)
    _check_launcher(pf)
    if pf.base is not None:  # with no base here at all, its missing data is no news
        _check_inputs(pf, launching=launching)
        _open_inputs(pf, resume=resume, resume_from=resume_from, launching=launching)
    _check_memory(pf)
    return pf


def _read_base(
    pf: Preflight, base: BaseLayout, *, base_made_by_pretrain: bool
) -> tuple[dict[str, BaseInfo], CheckpointInfo | None]:
    """The base step's facts into `pf.base`, its replicates' and its checkpoint's; with `base_made_by_pretrain`
    a missing base is expected, not a problem."""
    spec, step = pf.spec, pf.spec.base_step
    if step is None:
        return {}, None
    expected_missing = base_made_by_pretrain and spec.pretrain is not None
    info: CheckpointInfo | None = None
    try:
        require_checkpoint(base, spec.base.tag, step)
        pf.base = read_base_info(base, spec.base.tag, step)
    except RlabError as exc:
        if not expected_missing:
            pf.problem(exc)
    if pf.base is not None:
        info = _check_architecture(pf, base.checkpoint_dir(spec.base.tag), step)
    replicas = {} if expected_missing else _base_replicas(pf, base, step)
    return replicas, info


def _base_notes(pf: Preflight, base: BaseLayout, info: BaseInfo) -> None:
    """Warnings about the plan against its base: lengths, the settings it changes, an unknown data position."""
    spec = pf.spec
    pf.warnings += length_warnings(spec, info)
    pf.changes = base_changes(spec, info.meta, base)
    if spec.train.data_start == "after_base" and info.data_start is None:
        pf.warnings.append(
            f"{spec.base.tag}@{spec.base_step} records no data loader position: every variant reads the "
            "train data from its beginning (text the base may have trained on)."
        )


def _base_replicas(pf: Preflight, base: BaseLayout, step: int) -> dict[str, BaseInfo]:
    """The facts of each base replicate past the first (train.replicate_base); a missing one, or one of
    another context length than the base, is a problem naming the command that makes it."""
    spec, out = pf.spec, {}
    for i, tag in enumerate(base_tags(spec)[1:], start=1):
        if not base.checkpoint_dir(tag).is_dir() or not meta_file(base.checkpoint_dir(tag), step).is_file():
            make = (
                f"Make the bases with `rlab pretrain --seeds {spec.train.seeds}` on this spec"
                if spec.pretrain is not None
                else f"Train it into {base.checkpoint_dir(tag)}"
            )
            pf.problem(
                CheckpointError(
                    f"Base replicate '{tag}' has no checkpoint at step {step} (train.replicate_base: seed {i} "
                    f"continues it).",
                    f"{make}, or set train.replicate_base: false.",
                )
            )
            continue
        out[tag] = read_base_info(base, tag, step)
        if pf.base is not None and out[tag].sequence_len != pf.base.sequence_len:
            pf.problem(
                f"Base replicate '{tag}' has context {out[tag].sequence_len}, the base '{spec.base.tag}' "
                f"{pf.base.sequence_len}: replicates of one base must share its shape and length."
            )
    return out


def _check_architecture(pf: Preflight, ckpt_dir: Path, step: int) -> CheckpointInfo | None:
    """A base of an architecture rlab does not know (its keys) stops the run before any clone; a model file
    that cannot be read is a warning here (the job's own load stops on it with the same message)."""
    from rlab.core.checkpoint import UnreadableModelFile, inspect_checkpoint  # noqa: PLC0415 - defers numpy, torch

    try:
        return inspect_checkpoint(ckpt_dir, step)
    except UnreadableModelFile as exc:
        pf.warnings.append(exc.message)
    except RlabError as exc:
        pf.problem(exc)
    return None


def _check_tags(pf: Preflight, *, resume: bool, force: bool) -> None:
    base = base_layout(pf.spec)
    for run in pf.runs:
        try:
            action = tag_action(base.checkpoint_dir(run.tag).exists(), resume=resume, force=force)
        except RlabError as exc:
            pf.problem(exc)
            return
        if action == "refuse":
            pf.problem(tag_exists_error(base, run.tag, run.variant))
        elif action == "resume":
            mismatch = resume_mismatch(base, run)
            if mismatch is not None:
                pf.problem(mismatch)
        holder = lock_holder(base, run.tag)
        if holder is not None:
            pf.problem(
                f"Tag '{run.tag}' is being trained by another rlab ({holder}). Wait for it to "
                "finish or stop it; two runs on one tag would write the same checkpoints."
            )


def resume_mismatch(base: BaseLayout, run: RunConfig) -> RlabError | None:
    """Why `--resume` must not continue `run.tag`: another experiment owns it, or it was cloned from
    another base step than this plan's. None when it may (or when it has no complete checkpoint yet)."""
    meta = newest_meta(base.checkpoint_dir(run.tag))
    if meta is None:
        return None  # none yet, or unreadable: the worker reports an unreadable meta with its own error
    owner = meta.owner(run.tag)
    if owner is not None and owner != run.experiment:
        return CheckpointError(
            f"Tag '{run.tag}' belongs to experiment '{owner}', not '{run.experiment}': resuming it here would mix "
            "two experiments.",
            "Give this experiment its own `name:` (its tags are then <base>-<name>-<variant>), or replace the tag "
            "with --force.",
        )
    lineage, want = meta.lineage, run.lineage
    if want is not None and lineage is not None and lineage != want:
        were = f"{lineage.parent_tag}@{lineage.parent_step}"
        return CheckpointError(
            f"Tag '{run.tag}' was cloned from {were}, but this plan starts from {want.parent_tag}@{want.parent_step}.",
            f"Resume it with --base-tag {lineage.parent_tag} --from-step {lineage.parent_step}, or "
            f"re-clone it from {want.parent_tag}@{want.parent_step} with --force.",
        )
    return None


def results_dir_error(root: Path) -> RlabError | None:
    """An error when results cannot be written under `root` (checked at the nearest folder that exists)."""
    probe = root
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
        return None
    return LaunchError(
        f"Results dir {root} cannot be written ({probe} is not a writable folder).",
        "Pass --results-dir (or set $RLAB_RESULTS_DIR) to a folder you can write.",
    )


def require_writable_results(root: Path) -> None:
    """Raise instead of writing anywhere else when `root` cannot be written (`rlab eval`)."""
    error = results_dir_error(root)
    if error is not None:
        raise error


def _check_results_dir(pf: Preflight, root: Path) -> None:
    error = results_dir_error(root)
    if error is not None:
        pf.problem(error)


def _check_disk(pf: Preflight, ckpt_dir: Path, step: int | None, *, resume: bool) -> None:
    """Room for the clones and the checkpoints the runs save (`rlab.orchestrate.disk`)."""

    if step is None or not pf.runs:
        return
    base = base_layout(pf.spec)
    trained = [run for run in pf.runs if run.train.steps > 0]
    copied = [run for run in pf.runs if not (resume and base.checkpoint_dir(run.tag).exists())]
    plan = plan_disk(pf.spec.train, ckpt_dir, step, len(trained), len(copied))
    problem = plan.problem()
    if problem is not None:
        pf.problem(problem)


def _check_launcher(pf: Preflight) -> None:

    launch = pf.spec.launch
    if launch.launcher != "local":
        return
    try:
        resolve_program(launch.torchrun)
        device_slots(launch, visible_gpus())
    except RlabError as exc:
        pf.problem(exc)


def _check_memory(pf: Preflight) -> None:
    """A GPU launch whose memory plan does not fit is a problem naming the device batch that does
    (`rlab.orchestrate.memory_check`); CPU launches are not planned."""
    from rlab.orchestrate.memory_check import does_not_fit, gpu_launch, plan_continue_memory  # noqa: PLC0415 - defers numpy, torch

    trained = [run.tag for run in pf.runs if run.train.steps > 0]
    if pf.base is None or not trained or not gpu_launch(pf.spec.launch, visible_gpus()):
        return
    try:
        pf.memory, chosen = plan_continue_memory(pf.spec, pf.base)
    except RlabError as exc:  # e.g. batch arithmetic that does not divide, reported on its own
        pf.warnings.append(f"memory plan not made: {exc.message}")
        return
    except Exception as exc:  # noqa: BLE001 - tracing the model failed: say so, do not block the launch
        pf.warnings.append(f"memory plan failed ({type(exc).__name__}: {exc}); the GPU fit was not checked")
        return
    if not pf.memory.fits:
        pf.problem(does_not_fit(pf.memory, trained))
    elif pf.spec.train.activation_checkpointing == "auto":  # the runs train with what the plan resolved
        setting = pf.memory.shape.activation_checkpointing
        resolved = {"activation_checkpointing": setting}
        pf.runs = [run.model_copy(update={"train": run.train.model_copy(update=resolved)}) for run in pf.runs]
        pf.notes += [chosen] if chosen else []


def _resumed(pf: Preflight) -> list[RunConfig]:
    """The trained runs that resume their own existing tag."""
    base = base_layout(pf.spec)
    return [run for run in pf.runs if run.train.steps > 0 and base.checkpoint_dir(run.tag).exists()]


def _adjust_resumed_batches(pf: Preflight) -> None:
    """A resume at another world size keeps its global batch when accumulation allows, and says so."""
    from rlab.orchestrate.resume import keep_global_batch  # noqa: PLC0415 - defers numpy, torch

    base, world = base_layout(pf.spec), pf.spec.launch.world_size
    resumed = {run.tag for run in _resumed(pf)}
    for i, run in enumerate(pf.runs):
        if run.tag in resumed:
            pf.runs[i], line = keep_global_batch(run, base.checkpoint_dir(run.tag), world)
            if line is not None:
                (pf.notes if pf.runs[i] is not run else pf.warnings).append(line)


def _open_inputs(pf: Preflight, *, resume: bool, resume_from: int | None, launching: bool) -> None:
    from rlab.orchestrate.inputs import input_problems  # noqa: PLC0415 - defers numpy, torch
    from rlab.orchestrate.tag_setup import rerun_command  # noqa: PLC0415 - defers numpy, torch

    assert pf.base is not None
    found = input_problems(
        base_layout(pf.spec),
        pf.spec.base.tag,
        pf.base.step,
        _resumed(pf) if resume else [],
        resume_from=resume_from,
        rerun=lambda variant: rerun_command(pf.spec, [variant]),
    )
    said = {e.message for e in pf.errors}  # the architecture check may have found it already
    for exc in found:
        if exc.message in said:
            continue
        # said as the architecture check's warning: said once, as what it is for the run
        pf.warnings[:] = [line for line in pf.warnings if not line.startswith(exc.message)]
        if launching:
            pf.problem(exc)
        else:
            pf.warnings.append(f"{exc.message} (`rlab continue` refuses to start with this)")


def _check_inputs(pf: Preflight, *, launching: bool) -> None:
    """What the later evals read (`rlab.orchestrate.eval_inputs`): a missing one is a warning of a launch (a dry run
    lists them all), and the CORE task selection a problem."""

    pf.eval_inputs = eval_inputs(pf.spec)
    if launching:
        pf.warnings += [item.line() for item in pf.eval_inputs if item.state == "missing"]
    if not any(item.name == "CORE bundle" and item.state == "missing" for item in pf.eval_inputs):
        try:  # a typo in eval.core_tasks would otherwise surface only at `rlab eval`, after training
            check_task_selection(pf.spec.eval, base_layout(pf.spec).root)
        except RlabError as exc:
            pf.problem(exc)


def plan_json(pf: Preflight, jobs: list[Any]) -> dict[str, Any]:
    """The resolved plan as JSON (`rlab continue --dry-run --json`): one entry per tag."""

    launch = pf.spec.launch
    commands = {job.tag: job.command() for job in jobs}
    tags = []
    for run in pf.runs:
        rope = run.rope
        train = run.train
        batch = train.total_batch_size or train.device_batch_size * train.seq_len * launch.world_size
        tags.append(
            {
                "tag": run.tag,
                "variant": run.variant,
                "control": is_control(pf.spec, run.variant),
                "from": f"{run.lineage.parent_tag}@{run.lineage.parent_step}" if run.lineage else None,
                "rope": rope.model_dump(mode="json"),
                "L0": rope.original_len,
                "factor": rope.factor,
                "seq_len": train.seq_len,
                "steps": train.steps,
                "tokens": batch * train.steps,
                "data_start": None
                if run.data_start is None
                else {**run.data_start.model_dump(mode="json"), "describe": run.data_start.describe()},
                "nproc": launch.procs_per_job,
                "nnodes": launch.nnodes,
                "peak_gib": pf.memory.peak_gib if pf.memory is not None and train.steps > 0 else None,
                "command": commands.get(run.tag),
            }
        )
    return {
        "experiment": pf.spec.experiment,
        "base": {
            "tag": pf.spec.base.tag,
            "step": pf.spec.base_step,
            "dir": str(base_layout(pf.spec).root),
            "L0": pf.base.sequence_len if pf.base else None,
        },
        "target_len": pf.spec.target_len,
        "results": str(experiment_layout(pf.spec).root),
        "tags": tags,
        "memory": None if pf.memory is None else pf.memory.model_dump(mode="json"),
        "changes_vs_base": [{**vars(c), "changed": c.changed} for c in pf.changes],
        "eval_inputs": [vars(item) for item in pf.eval_inputs],
        "warnings": pf.warnings,
        "problems": pf.problems,
        "ok": pf.ok,
    }
