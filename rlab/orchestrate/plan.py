"""Spec -> resolved per-tag configs. Pure and deterministic: no I/O, no clock, no environment.

`plan_continue` gives the `RunConfig`s of every variant (tag ``<base>-<variant>``, or
``<base>-<name>-<variant>`` for a named experiment, starting from that tag's clone of the base
step; with ``train.seeds`` > 1 one more tag ``...-seed<i>`` per replicate; with
``train.zero_shot`` or ``steps: 0`` a training-free tag ``...-zeroshot``), `plan_pretrain` the
from-scratch run that makes the base, and `plan_eval` the `EvalRunConfig` of one tag. Lengths
come from the base checkpoint's facts (`rlab.orchestrate.base_info`) when given. The spec must
already be resolved (`rlab.spec.loading.load_spec` fills base_dir and results_dir).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rlab.errors import SpecError
from rlab.paths import BaseLayout, ExperimentLayout
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.rope import EXTENSION_VARIANTS, RopeSpec
from rlab.spec.run import CheckpointInit, EvalRunConfig, Lineage, RunConfig, ScratchInit
from rlab.spec.train import TrainSpec

if TYPE_CHECKING:
    from rlab.orchestrate.base_info import BaseInfo

DEFAULT_EXTENSION = 4
"""The default target length is this many times the base checkpoint's sequence_len."""


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


def resolve_lengths(spec: ExperimentSpec, base: BaseInfo) -> ExperimentSpec:
    """The spec with target_len, train.seq_len and every variant's factor and L0 filled in from the base.

    target_len defaults to 4 x L0 (the base's sequence_len); train.seq_len, when not given, is the
    target; a variant's factor, when not given (and no `scale`), is target / L0. The result is
    concrete, so saving it and planning from it again gives the same runs.
    """
    l0 = base.sequence_len
    target = spec.target_len or DEFAULT_EXTENSION * l0
    train = spec.train
    if "seq_len" not in train.model_fields_set:
        train = train.model_copy(update={"seq_len": target})
        train.model_fields_set.add("seq_len")
        if problem := train.warmup_problem():
            raise SpecError(
                f"train.{problem}; train.seq_len is the target length {target} here.",
                "Give train.seq_len_warmup lengths that divide it, or set train.seq_len.",
            )
    variants = {name: rope.with_original_len(l0) for name, rope in _with_factors(spec, target / l0).items()}
    return spec.model_copy(update={"target_len": target, "train": train, "variants": variants})


def _with_factors(spec: ExperimentSpec, factor: float) -> dict[str, RopeSpec]:
    """The spec's variants, each extension variant without a factor of its own given `factor`."""
    variants = {}
    for name, rope in spec.variants.items():
        if rope.variant.value in EXTENSION_VARIANTS and "factor" not in rope.model_fields_set:
            rope = RopeSpec.model_validate(
                {**rope.model_dump(exclude_unset=True), "factor": max(1.0, factor)}
            )
        variants[name] = rope
    return variants


def length_warnings(spec: ExperimentSpec, base: BaseInfo) -> list[str]:
    """Lengths that contradict the experiment: seq_len at or below L0 for an extension variant, or a factor
    that disagrees with target_len / L0. `spec` is resolved (see `resolve_lengths`)."""
    l0, target, seq_len = base.sequence_len, spec.target_len, spec.train.seq_len
    warnings = []
    for name, rope in spec.variants.items():
        if rope.variant.value not in EXTENSION_VARIANTS:
            continue
        if seq_len <= l0:
            warnings.append(
                f"{name}: train.seq_len {seq_len} is not above the base's context L0={l0}; "
                f"an extension variant trained there does not extend anything."
            )
        if target and abs(rope.factor - target / l0) > 1e-9:
            warnings.append(
                f"{name}: factor {rope.factor:g} disagrees with target_len / L0 = {target} / {l0} = "
                f"{target / l0:g}."
            )
    return warnings


def plan_continue(
    spec: ExperimentSpec, base: BaseInfo | None = None, *, check: bool = True
) -> list[RunConfig]:
    """One continued-pretraining run per variant, in the spec's order.

    With `base` (the base step's facts), lengths and factors are resolved from it and every run
    starts the train data at the base's recorded loader position (train.data_start: after_base).
    `check=False` skips the batch arithmetic (the preflight reports it with the other problems).
    """
    if base is not None:
        spec = resolve_lengths(spec, base)
    else:  # the base is unknown (no checkpoint here): the default 4x extension
        spec = spec.model_copy(update={"variants": _with_factors(spec, DEFAULT_EXTENSION)})
    data_start = base.data_start if base is not None and spec.train.data_start == "after_base" else None
    step = spec.base_step
    if step is None:
        raise SpecError(
            "No base step to continue from.", "Pass --from-step N (or set base.step in the spec)."
        )
    if not spec.variants:
        raise SpecError(
            "No variants to run.", "Pass --variants pi,ntk,yarn or list them under `variants:` in the spec."
        )
    if check:
        check_batch(spec.train, spec.launch.world_size)
    layout = experiment_layout(spec)
    base_dir = base_layout(spec).root
    runs = []
    for variant, rope in spec.variants.items():
        for tag, train in arm_runs(spec, variant):
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
                    train=train,
                    tracking=spec.tracking,
                    data_start=data_start,
                )
            )
    return runs


ZERO_SHOT_SUFFIX = "-zeroshot"
_SEED_SUFFIX = re.compile(r"-seed[1-9][0-9]*$")


def replicate_suffix(index: int) -> str:
    """Tag suffix of seed replicate `index`: none for the first (the plain tag), ``-seed<i>`` after it."""
    return "" if index == 0 else f"-seed{index}"


def arm_runs(spec: ExperimentSpec, variant: str) -> list[tuple[str, TrainSpec]]:
    """(tag, train settings) of every run of one variant: its seed replicates (train.seed + i, same budget and
    data start), then its training-free arm (steps 0) when asked for."""
    tag, train = spec.tag_for(variant), spec.train
    out = []
    if train.steps > 0:
        out += [
            (tag + replicate_suffix(i), train.model_copy(update={"seed": train.seed + i}))
            for i in range(train.seeds)
        ]
    if train.steps == 0 or train.zero_shot:
        out.append((tag + ZERO_SHOT_SUFFIX, train.model_copy(update={"steps": 0, "seeds": 1})))
    return out


def experiment_tags(spec: ExperimentSpec) -> list[str]:
    """Every tag `rlab continue` makes for the spec (the base first when it is a reference arm)."""
    tags = [spec.base.tag] if spec.train.steps == 0 or spec.train.zero_shot else []
    return tags + [tag for variant in spec.variants for tag, _ in arm_runs(spec, variant)]


def plan_pretrain(spec: ExperimentSpec) -> RunConfig:
    """The from-scratch run that trains the base model into base.tag (plain RoPE)."""
    if spec.pretrain is None:
        raise SpecError(
            "The spec has no `pretrain:` section.",
            "Add one (see experiments/demo.yaml), or start "
            "from an existing checkpoint with `rlab continue --from-step N`.",
        )
    if spec.pretrain.train.steps == 0:
        raise SpecError(
            "pretrain.train.steps: a base model needs at least one step (got 0).",
            "Set pretrain.train.steps (or --steps) to a positive number.",
        )
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


def arm_label(spec: ExperimentSpec, tag: str) -> str:
    """A tag's name without the experiment's prefix: ``d20-pi-seed1`` -> ``pi-seed1``; the base tag -> ``base``."""
    prefix = spec.tag_prefix
    if tag == spec.base.tag:
        return "base"
    return tag[len(prefix) :] if tag.startswith(prefix) and len(tag) > len(prefix) else tag


def variant_of_tag(spec: ExperimentSpec, tag: str) -> str:
    """The variant a tag belongs to by its name: ``d20-pi``, ``d20-pi-seed2``, ``d20-pi-zeroshot`` -> ``pi``;
    the base tag itself -> ``base``."""
    label = arm_label(spec, tag)
    return _SEED_SUFFIX.sub("", label.removesuffix(ZERO_SHOT_SUFFIX)) or label


def plan_eval(
    spec: ExperimentSpec, tag: str, variant: str | None = None, step: int | None = None
) -> EvalRunConfig:
    """The eval job of one tag (`variant` defaults to the one its name says)."""
    from rlab.evals.lengths import experiment_target_len

    variant = variant or variant_of_tag(spec, tag)
    layout = experiment_layout(spec)
    label = arm_label(spec, tag)  # replicates and zero-shot arms keep their own per-task CORE file
    return EvalRunConfig(
        experiment=spec.experiment,
        tag=tag,
        variant=variant,
        base_dir=base_layout(spec).root,
        step=step,
        out_dir=layout.eval_dir(tag),
        core_csv=layout.core_task_csv(label if label.startswith(f"{variant}-") else variant),
        eval=spec.eval.model_copy(update={"target_len": experiment_target_len(spec)}),
    )
