"""Spec -> resolved per-tag configs. Pure and deterministic: no I/O, no clock, no environment.

`plan_continue` gives one `RunConfig` per variant (tag ``<base>-<variant>``, starting from
that tag's clone of the base step), `plan_pretrain` the from-scratch run that makes the base,
and `plan_eval` the `EvalRunConfig` of one tag. The spec must already be resolved
(`rlab.spec.loading.load_spec` fills base_dir and results_dir).
"""

from __future__ import annotations

from rlab.errors import SpecError
from rlab.paths import BaseLayout, ExperimentLayout
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.rope import RopeSpec
from rlab.spec.run import CheckpointInit, EvalRunConfig, Lineage, RunConfig, ScratchInit
from rlab.spec.train import TrainSpec


def base_layout(spec: ExperimentSpec) -> BaseLayout:
    """The base dir's layout of a resolved spec."""
    if spec.base.base_dir is None:
        raise ValueError("spec is not resolved: base.base_dir is None (use load_spec or resolve_defaults)")
    return BaseLayout(spec.base.base_dir)


def experiment_layout(spec: ExperimentSpec) -> ExperimentLayout:
    """The results layout of a resolved spec."""
    if spec.results_dir is None:
        raise ValueError("spec is not resolved: results_dir is None (use load_spec or resolve_defaults)")
    return ExperimentLayout(spec.results_dir, spec.experiment)


def check_batch(train: TrainSpec, world_size: int, where: str = "train") -> int:
    """Gradient-accumulation steps for `train` at `world_size`; a SpecError when the batch does not divide.

    total_batch_size (tokens per optimizer step) = device_batch_size x seq_len x world_size x grad_accum.
    """
    per_step = train.device_batch_size * train.seq_len * world_size
    if train.total_batch_size is None:
        return 1
    if train.total_batch_size % per_step:
        lower = max(per_step, train.total_batch_size // per_step * per_step)
        raise SpecError(
            f"{where}.total_batch_size: {train.total_batch_size} tokens is not a multiple of device_batch_size x "
            f"seq_len x world size = {train.device_batch_size} x {train.seq_len} x {world_size} = {per_step}.",
            f"Use a multiple of {per_step} (e.g. {lower} or {lower + per_step}), or change "
            f"{where}.device_batch_size / --nproc.",
        )
    return train.total_batch_size // per_step


def plan_continue(spec: ExperimentSpec) -> list[RunConfig]:
    """One continued-pretraining run per variant, in the spec's order."""
    step = spec.base_step
    if step is None:
        raise SpecError("No base step to continue from.", "Pass --from-step N (or set base.step in the spec).")
    if not spec.variants:
        raise SpecError("No variants to run.", "Pass --variants pi,ntk,yarn or list them under `variants:` in the spec.")
    check_batch(spec.train, spec.launch.world_size)
    layout = experiment_layout(spec)
    base_dir = base_layout(spec).root
    runs = []
    for variant, rope in spec.variants.items():
        tag = spec.tag_for(variant)
        runs.append(
            RunConfig(
                experiment=spec.experiment,
                tag=tag,
                variant=variant,
                base_dir=base_dir,
                run_dir=layout.run_dir(tag),
                init=CheckpointInit(tag=tag, step=step),
                lineage=Lineage(parent_tag=spec.base.tag, parent_step=step),
                rope=rope,
                train=spec.train,
                tracking=spec.tracking,
            )
        )
    return runs


def plan_pretrain(spec: ExperimentSpec) -> RunConfig:
    """The from-scratch run that trains the base model into base.tag (plain RoPE)."""
    if spec.pretrain is None:
        raise SpecError("The spec has no `pretrain:` section.", "Add one (see experiments/demo.yaml), or start "
                        "from an existing checkpoint with `rlab continue --from-step N`.")
    check_batch(spec.pretrain.train, spec.launch.world_size, where="pretrain.train")
    tag = spec.base.tag
    return RunConfig(
        experiment=spec.experiment,
        tag=tag,
        variant="rope",
        base_dir=base_layout(spec).root,
        run_dir=experiment_layout(spec).run_dir(tag),
        init=ScratchInit(model=spec.pretrain.model),
        rope=RopeSpec(),
        train=spec.pretrain.train,
        tracking=spec.tracking,
    )


def variant_of_tag(spec: ExperimentSpec, tag: str) -> str:
    """The variant a tag belongs to by its name: ``d20-pi`` -> ``pi``; the base tag itself -> ``base``."""
    prefix = f"{spec.base.tag}-"
    if tag == spec.base.tag:
        return "base"
    return tag[len(prefix):] if tag.startswith(prefix) and len(tag) > len(prefix) else tag


def plan_eval(spec: ExperimentSpec, tag: str, variant: str | None = None, step: int | None = None) -> EvalRunConfig:
    """The eval job of one tag (`variant` defaults to the one its name says)."""
    variant = variant or variant_of_tag(spec, tag)
    layout = experiment_layout(spec)
    return EvalRunConfig(
        experiment=spec.experiment,
        tag=tag,
        variant=variant,
        base_dir=base_layout(spec).root,
        step=step,
        out_dir=layout.eval_dir(tag),
        core_csv=layout.core_task_csv(variant),
        eval=spec.eval if spec.eval.target_len else spec.eval.model_copy(update={"target_len": spec.train.seq_len}),
    )
