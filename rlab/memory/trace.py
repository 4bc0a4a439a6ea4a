"""One training step of rlab's own GPT, run under fake tensors and counted (`rlab.memory.tracker`).

`trace_step` builds the model and the optimizers with the trainer's own code (`GPT`, `build_optimizers`)
inside a `FakeTensorMode` (no memory is allocated: d20 at 8 x 8192 tokens takes seconds on a CPU) and
runs what `rlab.core.train` runs per step: for each micro-batch a forward under bf16 autocast (the CUDA
path's dtypes) and `(loss / accum).backward()`, then the grad norm, clipping and every optimizer's
`step()`, and `zero_grad(set_to_none=True)`. With several ranks the optimizers run as rank 0 of a fake
process group (`rlab.memory.fake_world`), so their state is what one rank keeps of it. Two steps run, so the optimizer state (made at the first
step) is alive during the second (whose update is not run: it would hold what the first one held); at most
two micro-batches per step, after which every step looks the same.

What the trace counts is eager autograd. On CUDA the trainer runs the model under torch.compile, whose
partitioner decides for itself what to keep for the backward (often less than eager, since it
recomputes cheap pointwise ops; `rlab.memory.compiled` measures its choice). DDP is not run here (it
cannot run on fake tensors): its gradient buckets are added by the plan from the trainer's DDP options.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from rlab.core.gpt import GPT
from rlab.core.gpt_config import GPTConfig
from rlab.core.optim import build_optimizers
from rlab.core.precision import stream_dtype
from rlab.core.target_device import planning_for
from rlab.memory.counts import StepTrace
from rlab.memory.fake_world import fake_world
from rlab.memory.shape import TrainShape
from rlab.memory.tracker import LiveTensors, SavedTensors
from rlab.spec.train import LRSpec

CUDA_BLOCK = 512  # the CUDA caching allocator hands out multiples of 512 bytes
TRACED_STEPS = 2  # the second step has the first one's optimizer state
TRACED_MICRO_STEPS = 2  # from the second micro-batch on, gradients exist during the backward


Built = tuple[torch.nn.Module, list[torch.optim.Optimizer], list[torch.nn.Module]]
"""What a step is traced on: the model, its optimizers and its blocks (in order)."""


def planned_model(config: GPTConfig, device: str, dtype: str) -> GPT:
    """rlab's GPT of `config` as the trainer and the eval worker prepare it for `device` under `dtype` (the
    embeddings' and residual stream's dtype, `rlab.core.precision`), on (fake) CPU storage."""
    amp = torch.bfloat16 if dtype == "bfloat16" else None

    def build() -> GPT:
        model = GPT(config)
        model.set_stream_dtype(stream_dtype(torch.device(device), amp))
        return model

    return on_cpu(build)


def rlab_model(config: GPTConfig, shape: TrainShape) -> GPT:
    """rlab's GPT of `config` as the trainer prepares it for the shape's device, dtype and checkpointing."""
    model = planned_model(config, shape.device, shape.dtype)
    model.set_activation_checkpointing(shape.activation_checkpointing)
    return model


def build_training(shape: TrainShape) -> Built:
    """rlab's model and optimizers as the trainer builds them for this shape, as rank 0 of `shape.nproc`
    (the weights' values do not matter). Muon's Newton-Schulz runs uncompiled here (fake tensors cannot
    run compiled kernels); its buffers are the same."""

    # as `rlab.core.trainer.Trainer` prepares it: the embeddings' and residual stream's dtype for the device,
    # then the optimizers, then the rotary tables (and block masks) built outside the compiled region
    model = rlab_model(shape.config, shape)
    world = shape.nproc if shape.shard_optimizer else 1
    optimizers = build_optimizers(model, LRSpec(), shape.config.n_embd, rank=0, world_size=world)
    model.precompute_tables(shape.seq_len, "cpu")
    return model, optimizers, list(model.transformer.h)  # type: ignore[arg-type]  # ModuleDict members are untyped


ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


def on_cpu(build: Callable[[], ModuleT]) -> ModuleT:
    """`build()` run on the meta device, then given (uninitialised) CPU storage, which is fake inside a
    FakeTensorMode. Built directly as fake tensors, a module could not change a parameter's dtype
    (`Module.to` swaps fake parameters, and a FakeTensorMode holds weak references to some of them, which
    forbids the swap); on the meta device it can, and `to_empty` then makes fresh parameters."""

    with unset_fake_temporarily(), torch.device("meta"):  # real meta tensors, not fake ones
        model = build()
    # `to_empty`, made from shapes alone: a FakeTensorMode accepts no real (meta) tensor as an input
    return model._apply(lambda t: torch.empty(t.shape, dtype=t.dtype, device="cpu"))


class _Regions:
    """Forward hooks that move the counters through embed -> layers -> head as the forward runs, and a
    tensor hook that marks where the head's backward ends (the gradient reaches the last block's output)."""

    def __init__(self, blocks: list[torch.nn.Module], tracker: LiveTensors, saved: SavedTensors) -> None:
        self.tracker, self.saved = tracker, saved
        self.head_backward_end = 0
        last = blocks[-1]
        self.handles = [b.register_forward_pre_hook(self._enter_block) for b in blocks]
        self.handles.append(last.register_forward_hook(self._leave_last))

    def _enter_block(self, module, args) -> None:
        self.saved.region = "layers"

    def _leave_last(self, module, args, output) -> None:
        self.saved.region = "head"
        self.tracker.set_phase("forward-head")
        if isinstance(output, torch.Tensor) and output.requires_grad:
            output.register_hook(self._head_backward_done)

    def _head_backward_done(self, grad: torch.Tensor) -> None:
        self.head_backward_end = self.tracker.live_bytes
        self.tracker.set_phase("backward")

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def _autocast(shape: TrainShape) -> contextlib.AbstractContextManager:
    if shape.dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=torch.bfloat16)


def trace_step(
    shape: TrainShape, *, fake: bool = True, build: Callable[[TrainShape], Built] = build_training
) -> StepTrace:
    """Run `shape`'s training step (see the module docstring) under the counters; bytes per rank.

    `fake=False` runs it for real (small shapes only: the tests compare both). `build` makes the model
    and optimizers (inside the counters); another GPT (nanochat's own, in `bench.memory_bench`) is
    traced with the same counters by passing its builder.
    """

    tracker = LiveTensors(round_to=CUDA_BLOCK if shape.device == "cuda" else 1)
    saved = SavedTensors(tracker)
    grads: set[int] = set()
    state: set[int] = set()

    mode = FakeTensorMode() if fake else contextlib.nullcontext()
    micro = min(shape.grad_accum_steps, TRACED_MICRO_STEPS)
    with fake_world(shape.nproc), planning_for(shape.device), mode, tracker:
        tracker.set_phase("setup")
        model, optimizers, blocks = build(shape)
        tracker.register_parameters(model.parameters())
        gen = torch.Generator().manual_seed(0) if not fake else None
        rows = (shape.device_batch_size, shape.seq_len)
        vocab = shape.config.vocab_size
        x = torch.randint(0, vocab, rows, generator=gen)
        y = torch.randint(0, vocab, rows, generator=gen)
        regions = _Regions(blocks, tracker, saved)
        try:
            head_fwd = head_bwd = 0
            for step in range(TRACED_STEPS):
                for i in range(micro):
                    counting = step == 0 and i == 0
                    saved.region = "embed"
                    tracker.set_phase("forward")
                    with saved.hooks(count=counting), _autocast(shape):
                        loss = model(x, y)
                    kept = tracker.live_bytes
                    tracker.set_phase("backward-head")
                    (loss / shape.grad_accum_steps).backward()
                    del loss
                    if counting:
                        head_fwd = tracker.phase_peak("forward-head") - kept
                        after = max(kept, regions.head_backward_end)  # what the head's backward left (grads)
                        head_bwd = tracker.phase_peak("backward-head") - after
                    grads |= tracker.tokens_of(p.grad for p in model.parameters())
                if step == 0:  # the second step's update would hold what the first one held
                    tracker.set_phase("optimizer")
                    _optimizer_step(model, optimizers)
                    state |= tracker.tokens_of(_state_tensors(optimizers))
                for opt in optimizers:
                    opt.zero_grad(set_to_none=True)
        finally:
            regions.close()
        sizes = _sizes(tracker, model, optimizers)
    return StepTrace(
        parameters=sizes["parameters"],
        gradients=sizes["gradients"],
        optimizer=sizes["optimizer"],
        weight_copies=saved.weights,
        saved=dict(saved.by_region),
        head_transient=max(head_fwd, head_bwd, 0),
        peak=tracker.peak.bytes,
        peak_phase=tracker.peak.phase,
        peak_parts=_peak_parts(tracker, grads, state, saved.tokens),
    )


def saved_by_region(shape: TrainShape, build: Callable[[TrainShape], Built] = build_training) -> Counter[str]:
    """What autograd saves in one forward of `shape` (no backward, no optimizer step: saving happens in
    the forward), by region, under fake tensors: cheaper than `trace_step` when only the saved bytes matter."""

    tracker = LiveTensors()
    saved = SavedTensors(tracker)
    with planning_for(shape.device), FakeTensorMode(), tracker:
        model, _, blocks = build(shape)
        tracker.register_parameters(model.parameters())
        x = torch.randint(0, shape.config.vocab_size, (shape.device_batch_size, shape.seq_len))
        regions = _Regions(blocks, tracker, saved)
        try:
            with saved.hooks(), _autocast(shape):
                model(x, x)
        finally:
            regions.close()
    return saved.by_region


def _optimizer_step(model: torch.nn.Module, optimizers: list[torch.optim.Optimizer]) -> None:
    """What `Trainer.train_step` does between the backward and zero_grad: total norm, clip, step."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None], foreach=True)
    torch.nn.utils.clip_grads_with_norm_(params, 1.0, norm, foreach=True)
    for opt in optimizers:
        opt.step()


def _state_tensors(optimizers: list[torch.optim.Optimizer]) -> list[torch.Tensor]:
    return [t for opt in optimizers for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]


def _sizes(tracker: LiveTensors, model: torch.nn.Module, optimizers: list[Any]) -> dict[str, int]:
    """Parameter, gradient (one per parameter, in its dtype) and optimizer-state bytes, rounded as the tracker rounds."""
    rounded = tracker._rounded

    def storage_bytes(tensors) -> int:
        seen, total = set(), 0
        for t in tensors:
            st = t.untyped_storage()
            if st._cdata not in seen:
                seen.add(st._cdata)
                total += rounded(st.nbytes())
        return total

    params = list(model.parameters())
    state = _state_tensors(optimizers)
    return {
        "parameters": storage_bytes(params),
        "gradients": sum(rounded(p.numel() * p.element_size()) for p in params if p.requires_grad),
        "optimizer": storage_bytes(t for t in state if t.dim() > 0),
    }


def _peak_parts(tracker: LiveTensors, grads: set[int], state: set[int], saved: set[int]) -> dict[str, int]:
    """The storages alive at the peak, by kind (the first kind that claims a storage wins)."""
    kinds = (
        ("parameters", tracker.parameters),
        ("gradients", grads),
        ("optimizer", state),
        ("weight_copies", tracker.weight_copies),
        ("activations", saved),
    )
    parts: Counter[str] = Counter()
    for token, size in tracker.peak.alive.items():
        kind = next((name for name, tokens in kinds if token in tokens), "transient")
        parts[kind] += size
    return dict(parts)
