"""Does a planned run fit its GPUs? The memory plan (`rlab memory`) of a continue, checked before launch.

A launch on GPUs (GPUs visible here, or a SLURM launch that asks for them) gets the per-rank memory
plan of its training shape: the base checkpoint's model at `train.seq_len` and `train.device_batch_size`,
on `launch.world_size` ranks, with the trainer's dtype, compile and optimizer sharding. A plan whose
peak passes the usable share of the GPU's memory is a problem of the preflight, which names the largest
device batch that fits with the accumulation that keeps `total_batch_size`. A CPU launch (gloo, the demo)
is not planned: it changes nothing there. Tracing the model takes seconds to a minute on a CPU (a d20 at
8 x 8192 tokens with its torch.compile count), so it runs once per shape, not per tag.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rlab.errors import LaunchError, RlabError

if TYPE_CHECKING:
    from rlab.memory.plan import MemoryPlan
    from rlab.memory.shape import TrainShape
    from rlab.orchestrate.base_info import BaseInfo
    from rlab.spec.experiment import ExperimentSpec, LaunchSpec


def gpu_launch(launch: LaunchSpec, gpus: list[str]) -> bool:
    """Whether the jobs run on GPUs: a local launch with GPUs visible, or SLURM asking for them."""
    if launch.launcher == "slurm":
        return bool(launch.slurm.gpus_per_node)
    return bool(gpus)


def gpu_memory_gib(launch: LaunchSpec) -> float:
    """launch.gpu_memory_gib, else this machine's first CUDA device's, else 80."""
    if launch.gpu_memory_gib is not None:
        return float(launch.gpu_memory_gib)
    from rlab.memory.plan import DEFAULT_GPU_MEMORY_GIB  # noqa: PLC0415 - defers numpy, torch

    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return DEFAULT_GPU_MEMORY_GIB
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory / 2**30
    return DEFAULT_GPU_MEMORY_GIB


def training_shape(spec: ExperimentSpec, base: BaseInfo) -> TrainShape:
    """The shape of one continued run of `spec` from `base` on GPUs."""
    from rlab.memory.shape import TrainShape, accumulation_for, model_config_from_meta  # noqa: PLC0415 - defers numpy, torch

    train = spec.train
    world = spec.launch.world_size
    return TrainShape(
        config=replace(model_config_from_meta(base.meta), sequence_len=train.seq_len),
        seq_len=train.seq_len,
        device_batch_size=train.device_batch_size,
        nproc=world,
        grad_accum_steps=accumulation_for(
            train.total_batch_size, train.device_batch_size, train.seq_len, world
        ),
        dtype="float32" if train.dtype == "float32" else "bfloat16",
        device="cuda",
        compile=True if train.compile is None else train.compile,
        shard_optimizer=train.shard_optimizer,
        activation_checkpointing="off"
        if train.activation_checkpointing == "auto"
        else train.activation_checkpointing,
    )


def plan_continue_memory(spec: ExperimentSpec, base: BaseInfo) -> tuple[MemoryPlan, str | None]:
    """The memory plan of `spec`'s runs from `base` on GPUs (every tag has the same shape), and with
    train.activation_checkpointing auto the line saying what it chose: the least checkpointing that fits at
    the configured batch (off when the run fits without; the plan without, and its suggestion, when nothing does)."""
    from rlab.memory.plan import least_checkpointing, plan_training  # noqa: PLC0415 - defers numpy, torch

    shape = training_shape(spec, base)
    gpu = gpu_memory_gib(spec.launch)
    if spec.train.activation_checkpointing != "auto":
        return plan_training(shape, gpu), None
    plan = plan_training(shape, gpu, suggest=False)
    if plan.fits:
        return plan, None
    chosen = least_checkpointing(shape, gpu, plan)
    if chosen is None:
        return plan_training(shape, gpu), None
    setting = chosen.shape.activation_checkpointing
    return chosen, (
        f"activation checkpointing {setting} (auto): without it the memory plan needs {plan.peak_gib:.1f} GiB per "
        f"rank, {plan.budget_gib:.1f} usable; with it {chosen.peak_gib:.1f} GiB, the least recomputation that fits"
    )


def does_not_fit(plan: MemoryPlan, tags: list[str]) -> RlabError:
    """The preflight's problem for a plan past the GPU's usable memory, with the batch that fits."""
    s = plan.shape
    who = tags[0] if len(tags) == 1 else f"{tags[0]} and {len(tags) - 1} more"
    message = (
        f"{who}: the memory plan needs {plan.peak_gib:.1f} GiB per rank (peak at {plan.peak_phase}) for "
        f"device_batch_size {s.device_batch_size} x seq_len {s.seq_len} on {s.nproc} rank(s), but "
        f"{plan.budget_gib:.1f} GiB of the GPU's {plan.gpu_memory_gib:.0f} are usable."
    )
    fix = plan.suggestion
    if fix is not None:
        hint = (
            f"Set train.device_batch_size: {fix.device_batch_size} ({fix.grad_accum_steps} accumulation steps "
            f"keep total_batch_size {s.total_batch_size:,}; planned peak {fix.peak_gib:.1f} GiB). `rlab memory` "
            "shows the plan."
        )
        if fix.activation_checkpointing != "off":
            hint = (
                f"Set train.activation_checkpointing: {fix.activation_checkpointing} (or auto; planned peak "
                f"{fix.peak_gib:.1f} GiB). `rlab memory` shows the plan."
            )
    else:
        from rlab.memory.plan import no_fit_advice  # noqa: PLC0415 - defers numpy, torch

        hint = no_fit_advice(plan)
    return LaunchError(message, hint)
