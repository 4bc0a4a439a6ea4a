"""The model a run trains, and the wrappers its step calls it through: DDP across ranks, torch.compile.

`build_model` makes the model at the start point, identical on every rank (the same seed; DDP also broadcasts
rank 0's weights). `wrap_model` puts it under DDP and the compiler. `StepModel` keeps all three views: the
optimizers, evals and checkpoints use the plain model, the micro-steps DDP's gradient sync, and a failed
compile falls back to the uncompiled wrapper (`rlab.core.train_step`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel

from rlab.core.attention_backends import attention_kernels, describe_attention
from rlab.core.distributed import DistInfo, wrap_ddp
from rlab.core.gpt import GPT
from rlab.core.head_loss import prepare_for_compile
from rlab.core.precision import Precision, stream_dtype
from rlab.core.train_start import StartPoint

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)


@dataclass
class StepModel:
    """The model and the wrappers around it."""

    model: GPT
    """The model itself: what the optimizers step, the evals score and checkpoints save."""
    eager: torch.nn.Module
    """`model` under DDP on a distributed run, else `model`: what a failed compile falls back to."""
    step_module: torch.nn.Module
    """What the step calls: `eager` compiled, or `eager` itself."""
    checkpointing: str
    """The blocks that keep only their input (resolved: off, all, every-k)."""

    @property
    def compiled(self) -> bool:
        return self.step_module is not self.eager

    def uncompile(self) -> None:
        self.step_module = self.eager

    def no_sync(self) -> contextlib.AbstractContextManager:
        """DDP's gradient all-reduce held off (a micro-step before the last); nothing to hold on one process."""
        if isinstance(self.eager, DistributedDataParallel):
            return self.eager.no_sync()
        return contextlib.nullcontext()

    def hold_attention_kernels(self, stack: contextlib.ExitStack, precision: Precision, seq_len: int) -> str:
        """Select the attention kernels for the run (held until `stack` closes); the line train.log shows."""
        c = self.model.config
        dtype = precision.amp_dtype or torch.float32
        sdpa = stack.enter_context(
            attention_kernels(precision.device, c.n_head, c.n_kv_head, c.head_dim, dtype)
        )
        return describe_attention(
            sdpa, self.model.window_sizes, seq_len, precision.device, self.model.window_kernel, self.compiled
        )


def build_model(start: StartPoint, seed: int, precision: Precision) -> GPT:
    """The model at `start`, on the run's device, with nanochat's stream dtype (bf16 embeddings and residual
    stream on a GPU under autocast), before the optimizers see the parameters."""
    torch.manual_seed(seed)
    model = GPT(start.config, rope=start.rope)
    if start.model_state is None:
        model.init_weights()
    else:
        model.load_nanochat_state_dict(start.model_state)
        start.model_state = None  # free the CPU copy
    model = model.to(precision.device)
    model.set_stream_dtype(stream_dtype(precision.device, precision.amp_dtype))
    return model


def wrap_model(
    model: GPT, dist: DistInfo, compile_wanted: bool, checkpointing: str, seq_lens: set[int]
) -> StepModel:
    """`model` with its blocks checkpointed as `checkpointing` says and its rotary tables for `seq_lens` made
    (outside the compiled region), under DDP when distributed, compiled when wanted and possible."""
    model.set_activation_checkpointing(checkpointing)
    for length in seq_lens:
        model.precompute_tables(length, dist.device)
    eager: torch.nn.Module = wrap_ddp(model, dist.device) if dist.is_distributed else model
    step_module = eager
    if compile_wanted:
        prepare_for_compile()
        try:
            # Fixed shapes (a row length is one graph; a warmup length another), as nanochat compiles.
            step_module = torch.compile(eager, dynamic=False)  # type: ignore[assignment]
        except Exception as exc:  # noqa: BLE001 - any backend failure means "run eager"
            logger.warning("torch.compile unavailable (%s); training uncompiled", exc)
    return StepModel(model=model, eager=eager, step_module=step_module, checkpointing=checkpointing)
