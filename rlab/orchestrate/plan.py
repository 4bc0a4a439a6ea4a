"""Spec -> resolved per-tag configs. Pure and deterministic: no I/O, no clock, no environment.

`plan_continue` gives the `RunConfig`s of every variant (tag ``<base>-<variant>``, or
``<base>-<name>-<variant>`` for a named experiment, starting from that tag's clone of the base
step; with ``train.seeds`` > 1 one more tag ``...-seed<i>`` per replicate; with
``train.zero_shot`` or ``steps: 0`` a training-free tag ``...-zeroshot``; with ``train.replicate_base``
replicate i, and its training-free tag ``...-seed<i>-zeroshot``, start from base replicate i), `plan_bases`
the from-scratch runs that make the base (``<base>``, ``<base>-seed<i>``), and `plan_eval` the
`EvalRunConfig` of one tag. Lengths
come from the base checkpoint's facts (`rlab.orchestrate.base_info`) when given. The spec must
already be resolved (`rlab.spec.loading.load_spec` fills base_dir and results_dir).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from rlab.errors import SpecError
from rlab.evals.lengths import experiment_target_len
from rlab.paths import BaseLayout, ExperimentLayout
from rlab.spec.experiment import REPLICATE_SUFFIX, ZERO_SHOT_SUFFIX, ExperimentSpec
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
    spec: ExperimentSpec,
    base: BaseInfo | None = None,
    *,
    check: bool = True,
    replicas: Mapping[str, BaseInfo] | None = None,
) -> list[RunConfig]:
    """One continued-pretraining run per variant, in the spec's order.

    With `base` (the base step's facts), lengths and factors are resolved from it and every run
    starts the train data at the base's recorded loader position (train.data_start: after_base);
    a run that continues a base replicate (train.replicate_base) starts at that replicate's, when
    `replicas` (base tag -> its facts) has it. `check=False` skips the batch arithmetic (the
    preflight reports it with the other problems).
    """
    if base is not None:
        spec = resolve_lengths(spec, base)
    else:  # the base is unknown (no checkpoint here): the default 4x extension
        spec = spec.model_copy(update={"variants": _with_factors(spec, DEFAULT_EXTENSION)})
    after_base = base is not None and spec.train.data_start == "after_base"
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
        for arm in arm_runs(spec, variant):
            source = (replicas or {}).get(arm.base_tag, base)
            runs.append(
                RunConfig(
                    experiment=spec.experiment,
                    tag=arm.tag,
                    variant=variant,
                    base_dir=base_dir,
                    run_dir=layout.run_dir(arm.tag),
                    init=CheckpointInit(tag=arm.tag, step=step),
                    lineage=Lineage(parent_tag=arm.base_tag, parent_step=step),
                    rope=rope,
                    train=arm.train,
                    tracking=spec.tracking,
                    data_start=source.data_start if after_base and source is not None else None,
                )
            )
    return runs


def replicate_suffix(index: int) -> str:
    """Tag suffix of seed replicate `index`: none for the first (the plain tag), ``-seed<i>`` after it."""
    return "" if index == 0 else f"-seed{index}"


class ArmRun(NamedTuple):
    """One run of a variant: its tag, its train settings and the base tag it starts from."""

    tag: str
    train: TrainSpec
    base_tag: str


def base_tags(spec: ExperimentSpec) -> list[str]:
    """The base tag of each seed replicate: base replicate i for replicate i with train.replicate_base
    (``<base>``, ``<base>-seed1``, ...), else the one base."""
    count = spec.train.seeds if spec.train.replicate_base else 1
    return [spec.base.tag + replicate_suffix(i) for i in range(count)]


def arm_runs(spec: ExperimentSpec, variant: str) -> list[ArmRun]:
    """Every run of one variant: its seed replicates (train.seed + i and data draw i, same budget), then its
    training-free arm (steps 0) when asked for; with train.replicate_base, one training-free arm per base
    replicate (``<tag>-seed<i>-zeroshot``), so zero-shot and continued arms pair on the same bases."""
    tag, train = spec.tag_for(variant), spec.train
    bases = base_tags(spec)
    out = []
    if train.steps > 0:
        out += [
            ArmRun(
                tag + replicate_suffix(i),
                train.model_copy(update={"seed": train.seed + i, "data_draw": i}),
                bases[i] if train.replicate_base else bases[0],
            )
            for i in range(train.seeds)
        ]
    if train.steps == 0 or train.zero_shot:
        zero_shot = train.model_copy(update={"steps": 0, "seeds": 1, "replicate_base": False})
        out += [
            ArmRun(
                tag + replicate_suffix(i) + ZERO_SHOT_SUFFIX,
                zero_shot.model_copy(update={"seed": train.seed + i}),
                base_tag,
            )
            for i, base_tag in enumerate(bases)
        ]
    return out


def experiment_tags(spec: ExperimentSpec) -> list[str]:
    """Every tag `rlab continue` makes for the spec (the bases first when they are a reference arm)."""
    tags = base_tags(spec) if spec.train.steps == 0 or spec.train.zero_shot else []
    return tags + [run.tag for variant in spec.variants for run in arm_runs(spec, variant)]


def pretrain_count(spec: ExperimentSpec) -> int:
    """How many bases `rlab pretrain` trains: pretrain.train.seeds, and at least one per seed replicate
    when the continued runs replicate the base (train.replicate_base)."""
    assert spec.pretrain is not None
    return max(spec.pretrain.train.seeds, spec.train.seeds if spec.train.replicate_base else 1)


def plan_bases(spec: ExperimentSpec) -> list[RunConfig]:
    """The from-scratch runs of every base replicate: base.tag, then ``<base>-seed<i>`` trained with
    pretrain.train.seed + i (other weights and data order, the same budget)."""
    first = plan_pretrain(spec)
    runs = [first]
    for i in range(1, pretrain_count(spec)):
        tag = spec.base.tag + replicate_suffix(i)
        runs.append(
            first.model_copy(
                update={
                    "tag": tag,
                    "run_dir": experiment_layout(spec).run_dir(tag),
                    "train": first.train.model_copy(update={"seed": first.train.seed + i}),
                }
            )
        )
    return runs


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


def is_base_tag(spec: ExperimentSpec, tag: str) -> bool:
    """Whether `tag` is the base or one of its replicates (``<base>-seed<i>``, from `rlab pretrain --seeds`)."""
    if tag == spec.base.tag:
        return True
    rest = tag.removeprefix(spec.base.tag)
    return rest != tag and REPLICATE_SUFFIX.fullmatch(rest) is not None


def arm_label(spec: ExperimentSpec, tag: str) -> str:
    """A tag's name without the experiment's prefix: ``d20-pi-seed1`` -> ``pi-seed1``; the base tag -> ``base``,
    a base replicate ``d20-seed1`` -> ``base-seed1``."""
    prefix = spec.tag_prefix
    if is_base_tag(spec, tag):
        return "base" + tag[len(spec.base.tag) :]
    return tag[len(prefix) :] if tag.startswith(prefix) and len(tag) > len(prefix) else tag


def variant_of_tag(spec: ExperimentSpec, tag: str) -> str:
    """The variant a tag belongs to by its name: ``d20-pi``, ``d20-pi-seed2``, ``d20-pi-zeroshot``,
    ``d20-pi-seed2-zeroshot`` -> ``pi``; the base tag and its replicates (``d20-seed1``) -> ``base``."""
    label = arm_label(spec, tag)
    return REPLICATE_SUFFIX.sub("", label.removesuffix(ZERO_SHOT_SUFFIX)) or label


def plan_eval(
    spec: ExperimentSpec, tag: str, variant: str | None = None, step: int | None = None
) -> EvalRunConfig:
    """The eval job of one tag (`variant` defaults to the one its name says)."""

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
