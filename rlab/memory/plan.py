"""The per-rank memory plan of a training shape, and the largest device batch that fits a GPU.

`plan_training` traces one training step (`rlab.memory.trace`) and adds what a single fake process
cannot run: DDP's gradient buckets, as the trainer configures DDP (`rlab.core.distributed.DDP_OPTIONS`).
When the run is compiled (CUDA's default), what autograd saves is replaced by what torch.compile's
partitioner saves (`rlab.memory.compiled`): the peak is the eager peak with the saved tensors (and
autocast's weight copies, which the compiled graph saves as its own bf16 casts) swapped for the
compiled graph's; the compiled kernels' working memory is taken to be the eager ops' at the peak.
The result is one typed record (`MemoryPlan`, also what `rlab memory --json` prints).

Counting is the slow part (seconds for d20 on a CPU); its result (`rlab.memory.counts.StepCounts`)
depends on the shape and the code only, so it is cached on disk (`rlab.memory.plan_cache`): the next
plan of the same shape, against any GPU, is read back in milliseconds.

A plan fits when its peak is at most `FIT_FRACTION` of the GPU's memory: the rest is for what no
trace of the model sees (the CUDA context, NCCL's buffers, torch.compile's workspaces, the caching
allocator's fragmentation).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rlab.activation_checkpointing import candidates, checkpointed_layers
from rlab.core.distributed import DDP_OPTIONS
from rlab.memory.counts import StepCounts, StepTrace
from rlab.memory.shape import TrainShape

GIB = 2**30
KIB = 2**10
FIT_FRACTION = 0.9
DEFAULT_GPU_MEMORY_GIB = 80.0

COUNTED_EAGER = (
    "Counted by running one training step of rlab's GPT under fake tensors on the CPU: eager autograd "
    "with the run's dtypes and the CUDA path's kernel choices. The run is not compiled."
)
COUNTED_COMPILED = (
    "Counted by running one training step of rlab's GPT under fake tensors on the CPU (eager autograd, "
    "bf16 autocast, the CUDA path's kernel choices); the saved activations are torch.compile's, from its "
    "partitioner run on the same fake tensors (the compiled kernels' working memory is the eager ops')."
)


class Suggestion(BaseModel):
    """A shape that fits: the largest smaller device batch (with the accumulation that keeps the tokens per
    step), else the configured batch with the least activation checkpointing."""

    model_config = ConfigDict(extra="forbid")

    device_batch_size: int
    grad_accum_steps: int
    peak_gib: float
    activation_checkpointing: str = "off"

    def describe(self) -> str:
        ckpt = self.activation_checkpointing
        return (
            f"device_batch_size {self.device_batch_size} with {self.grad_accum_steps} accumulation step(s)"
            + ("" if ckpt == "off" else f" and activation checkpointing {ckpt}")
            + f" (peak {self.peak_gib:.1f} GiB)"
        )


class LongestRow(BaseModel):
    """The longest length one row per rank trains at on a GPU of `gpu_memory_gib`, without and with every
    block checkpointed (None: not even the shortest planned length fits)."""

    model_config = ConfigDict(extra="forbid")

    gpu_memory_gib: float
    without_checkpointing: int | None
    with_checkpointing: int | None


class MemoryPlan(BaseModel):
    """Bytes per rank of one training step (GiB = 2^30 bytes); `peak_gib` against `gpu_memory_gib`."""

    model_config = ConfigDict(extra="forbid")

    shape: TrainShape
    parameters_gib: float
    gradients_gib: float
    ddp_buckets_gib: float
    """DDP's gradient buckets beyond the gradients (0 with one rank, or with gradient_as_bucket_view)."""
    optimizer_gib: float
    """Optimizer state held by this rank (as the optimizer code shards it, or not)."""
    weight_copies_gib: float
    """bf16 copies of the weights that autocast keeps for the backward."""
    activations_gib: float
    """What the backward keeps (each storage once): the compiled graph's when compiled, else eager autograd's."""
    eager_activations_gib: float
    """What eager autograd saves (the trace below, by region)."""
    compiled_activations_gib: float | None = None
    """What torch.compile's partitioner keeps (bf16 weight casts included); None when not compiled."""
    compiled_kib_per_token_per_layer: float | None = None
    compiled_outside_blocks_gib: float | None = None
    """Compiled: kept outside the blocks (the embedding and the loss head)."""
    activations_by_region_gib: dict[str, float]
    """The same, by where it was first saved: embed, layers (all blocks), head (final norm, lm_head, loss)."""
    kib_per_token_per_layer: float
    """Eager: saved in the blocks, per token of this rank's micro-batch and per layer."""
    head_kib_per_token: float
    """Eager: saved by the loss head, per token (its fixed part, e.g. the lm_head gradient, spread over the tokens)."""
    head_transient_gib: float
    """The most the loss head holds beyond what it keeps, in its forward or its backward."""
    peak_gib: float
    peak_phase: str
    """Where the peak falls: forward, forward-head (the loss head), backward-head, backward, optimizer."""
    peak_parts_gib: dict[str, float]
    """What is alive at the peak, by kind (transient = the working memory of the op at the peak)."""
    gpu_memory_gib: float
    budget_gib: float
    """FIT_FRACTION of the GPU's memory: the rest is for the CUDA context, NCCL, compile and fragmentation."""
    fits: bool
    ddp_bucket_view: bool
    counted: str
    suggestion: Suggestion | None = None
    longest: list[LongestRow] | None = None
    """The longest trainable length per GPU size, without and with checkpointing (`rlab.memory.checkpointing`)."""


def _gib(n: int | float) -> float:
    return round(n / GIB, 3)


def ddp_bucket_view() -> bool:
    """Whether the trainer's DDP keeps gradients as views into its buckets (no second copy)."""

    return bool(DDP_OPTIONS.get("gradient_as_bucket_view", False))


def peak_with_ddp(peak: int, trace: StepTrace, nproc: int) -> tuple[int, int]:
    """(peak, bucket bytes beyond the gradients) once DDP wraps the model (it does with several ranks).

    Without bucket views the buckets are a second gradient copy, alive all run; with them the
    gradients live in the buckets, which stay allocated between steps (zero_grad cannot free them).
    """
    if nproc == 1:
        return peak, 0
    if ddp_bucket_view():
        return peak - trace.peak_parts.get("gradients", 0) + trace.gradients, 0
    return peak + trace.gradients, trace.gradients


def plan_training(
    shape: TrainShape, gpu_memory_gib: float = DEFAULT_GPU_MEMORY_GIB, *, suggest: bool = True
) -> MemoryPlan:
    """Trace `shape` and report its per-rank memory; with `suggest`, a plan that does not fit also
    names the largest device batch that does (see `largest_fitting_batch`)."""
    plan = _plan(shape, gpu_memory_gib)
    if suggest and not plan.fits:
        plan.suggestion = largest_fitting_batch(shape, gpu_memory_gib)
    if suggest and not plan.fits and plan.suggestion is None and shape.activation_checkpointing == "off":
        fitting = least_checkpointing(shape, gpu_memory_gib, plan)
        if fitting is not None:
            plan.suggestion = Suggestion(
                device_batch_size=shape.device_batch_size,
                grad_accum_steps=shape.grad_accum_steps,
                peak_gib=fitting.peak_gib,
                activation_checkpointing=fitting.shape.activation_checkpointing,
            )
    return plan


def count_step(shape: TrainShape) -> StepCounts:
    """Trace `shape`'s training step, and count torch.compile's saved tensors when the run is compiled."""
    from rlab.memory.trace import trace_step  # noqa: PLC0415 - defers numpy, torch

    trace = trace_step(shape)
    if not shape.compile:
        return StepCounts(trace=trace)
    from rlab.memory.compiled import compiled_saved  # noqa: PLC0415 - defers numpy, torch

    return StepCounts(trace=trace, compiled=compiled_saved(shape))


def measure(shape: TrainShape) -> StepCounts:
    """`shape`'s counts: from the plan cache, else counted now and cached."""
    from rlab.memory.plan_cache import cached_counts  # noqa: PLC0415 - defers numpy, torch

    return cached_counts(shape, count_step)


def _plan(shape: TrainShape, gpu_memory_gib: float) -> MemoryPlan:
    counts = measure(shape)
    trace, compiled = counts.trace, counts.compiled
    peak, kept = trace.peak, trace.activations
    if compiled is not None:
        eager_kept_at_peak = trace.peak_parts.get("activations", 0) + trace.peak_parts.get("weight_copies", 0)
        peak, kept = peak - eager_kept_at_peak + compiled.total, compiled.total
    peak, buckets = peak_with_ddp(peak, trace, shape.nproc)
    budget = FIT_FRACTION * gpu_memory_gib
    tokens = shape.tokens
    return MemoryPlan(
        shape=shape,
        parameters_gib=_gib(trace.parameters),
        gradients_gib=_gib(trace.gradients),
        ddp_buckets_gib=_gib(buckets),
        optimizer_gib=_gib(trace.optimizer),
        weight_copies_gib=_gib(trace.weight_copies),
        activations_gib=_gib(kept),
        eager_activations_gib=_gib(trace.activations),
        compiled_activations_gib=None if compiled is None else _gib(compiled.total),
        compiled_kib_per_token_per_layer=None
        if compiled is None
        else round(compiled.per_layer / tokens / KIB, 2),
        compiled_outside_blocks_gib=None if compiled is None else _gib(compiled.outside_blocks),
        activations_by_region_gib={k: _gib(v) for k, v in sorted(trace.saved.items())},
        kib_per_token_per_layer=round(trace.saved["layers"] / tokens / shape.config.n_layer / KIB, 2),
        head_kib_per_token=round(trace.saved["head"] / tokens / KIB, 2),
        head_transient_gib=_gib(trace.head_transient),
        peak_gib=_gib(peak),
        peak_phase=trace.peak_phase,
        peak_parts_gib={k: _gib(v) for k, v in sorted(trace.peak_parts.items())},
        gpu_memory_gib=round(gpu_memory_gib, 2),
        budget_gib=round(budget, 2),
        fits=peak / GIB <= budget,
        ddp_bucket_view=ddp_bucket_view(),
        counted=COUNTED_COMPILED if shape.compile else COUNTED_EAGER,
    )


def no_fit_advice(plan: MemoryPlan) -> str:
    """What to change when nothing smaller fits: only remedies that lower a rank's peak (more
    data-parallel GPUs do not shrink a rank's row; they shrink sharded optimizer state only)."""
    shape = plan.shape
    fixes = ["a shorter seq_len", "a GPU with more memory"]
    if shape.activation_checkpointing in ("off", "all"):  # off: `plan_training` tried all
        checkpointed = ", even with every block checkpointed"
    else:
        checkpointed = f" with activation checkpointing {shape.activation_checkpointing}"
        fixes.insert(0, "train.activation_checkpointing: all")
    if not shape.compile:
        fixes.insert(0, "torch.compile (train.compile: true; it keeps less than eager)")
    if shape.nproc > 1 and not shape.shard_optimizer:
        fixes.insert(0, "train.shard_optimizer: true")
    return (
        f"Not even one row per micro-batch fits{checkpointed}: use {', or '.join(fixes)} "
        "(`rlab memory --longest` lists the longest length per GPU size)."
    )


def batch_candidates(shape: TrainShape) -> list[tuple[int, int]]:
    """(device batch, accumulation) pairs below the shape's that keep its tokens per step, largest first."""
    rows = shape.device_batch_size * shape.grad_accum_steps  # rows per rank per optimizer step
    return [(b, rows // b) for b in range(shape.device_batch_size - 1, 0, -1) if rows % b == 0]


def largest_fitting_batch(shape: TrainShape, gpu_memory_gib: float) -> Suggestion | None:
    """The largest smaller device batch whose plan fits, with the accumulation that keeps
    `total_batch_size`; None when even one row per micro-batch does not fit."""
    for batch, accum in batch_candidates(shape):
        plan = _plan(shape.with_batch(batch, accum), gpu_memory_gib)
        if plan.fits:
            return Suggestion(device_batch_size=batch, grad_accum_steps=accum, peak_gib=plan.peak_gib)
    return None


def least_checkpointing(
    shape: TrainShape, gpu_memory_gib: float, off: MemoryPlan | None = None
) -> MemoryPlan | None:
    """The plan of the setting with the fewest checkpointed blocks under which `shape` fits, None when
    not even every block checkpointed fits. `off` is the shape's plan without checkpointing, if made."""
    n_layer = shape.config.n_layer
    settings = candidates(n_layer)[1:]
    everything = plan_training(shape.with_checkpointing("all"), gpu_memory_gib, suggest=False)
    if not everything.fits:
        return None
    off = off or plan_training(shape.with_checkpointing("off"), gpu_memory_gib, suggest=False)

    def predicted(setting: str) -> float:
        share = len(checkpointed_layers(setting, n_layer)) / n_layer
        return off.peak_gib + (everything.peak_gib - off.peak_gib) * share

    start = next(i for i, s in enumerate(settings) if predicted(s) <= everything.budget_gib)
    plans = {len(settings) - 1: everything}

    def plan_at(i: int) -> MemoryPlan:
        if i not in plans:
            plans[i] = plan_training(shape.with_checkpointing(settings[i]), gpu_memory_gib, suggest=False)
        return plans[i]

    i = start
    while not plan_at(i).fits:  # the line was optimistic: more checkpointing (`all` fits)
        i += 1
    while i > 0 and plan_at(i - 1).fits:  # it was pessimistic: less
        i -= 1
    return plan_at(i)
