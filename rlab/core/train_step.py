"""One optimizer step of the trainer: gradient accumulation, the first compiled step's check, skipping.

A step forwards and backwards every micro-batch (DDP all-reduces on the last only), logs the global loss (the
mean of every rank's), and applies the optimizers unless the loss or gradient norm is non-finite or exploding
(`rlab.core.train_guard` stops a run that skips too many in a row). The first compiled step runs once on its
own so that a compiler error on any rank makes every rank continue uncompiled (`StepRunner._check_compile`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim import Optimizer

from rlab.core.batch_plan import BatchPlan
from rlab.core.distributed import DistInfo, all_gather_scalar
from rlab.core.loader import TokenLoader
from rlab.core.metrics import MemoryMeter
from rlab.core.muon import ShardedMuon
from rlab.core.optim import set_lr_multiplier
from rlab.core.precision import Precision
from rlab.core.schedule import lr_multiplier
from rlab.core.step_failures import any_rank, describe, is_compiler_error
from rlab.core.train_model import StepModel
from rlab.spec.train import LRSpec, TrainSpec

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)

Batch = tuple[torch.Tensor, torch.Tensor]
"""One micro-batch: inputs and targets, (B, T) each."""


@dataclass
class RunCounters:
    """Cumulative counters, carried on from the checkpoint (never recomputed from step counts)."""

    tokens_trained: int
    """Tokens of the optimizer steps applied behind the weights (the base's included)."""
    run_tokens: int
    """Tokens this run consumed, skipped steps included."""
    skipped_total: int
    consecutive_skips: int = 0
    last_val_bpb: float | None = None


@dataclass
class StepRunner:
    """Runs the optimizer steps of one run on its model, optimizers and train loader; advances `counters`."""

    model: StepModel
    optimizers: list[Optimizer]
    loader: TokenLoader
    batch: BatchPlan
    train: TrainSpec
    lr: LRSpec
    """`train.lr` with the warmup the run's LR policy set."""
    run_start_step: int
    """The global step at which this run (schedule position 0) began."""
    end_step: int
    dist: DistInfo
    precision: Precision
    flops_per_token: float
    peak_flops: float | None
    memory: MemoryMeter
    counters: RunCounters
    _compile_checked: bool = field(default=False, init=False)

    def _forward_backward(self, batches: list[Batch]) -> torch.Tensor:
        """Accumulate gradients over the micro-batches; returns this rank's mean loss (detached)."""
        n = len(batches)
        total = torch.zeros((), device=self.dist.device)
        for i, (x, y) in enumerate(batches):
            with (
                self.model.no_sync() if i < n - 1 else contextlib.nullcontext()
            ):  # all-reduce on the last only
                with self.precision.autocast():
                    loss = self.model.step_module(x, y)
                (loss / n).backward()
            total += loss.detach().float()
        return total / n

    def _check_compile(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """The first compiled forward + backward (where compilation happens), on the first micro-batch with
        DDP's gradient sync off, so a rank whose compile failed leaves no other rank waiting in an all-reduce.

        A compiler error on any rank (an all-reduced flag) makes every rank continue uncompiled; any other
        error propagates. The gradients are dropped: the step itself runs next, as it would have.
        """
        self._compile_checked = True
        error: BaseException | None = None
        try:
            with self.model.no_sync():
                with self.precision.autocast():
                    loss = self.model.step_module(x, y)
                loss.backward()
        except Exception as exc:  # only a compiler error is kept (fallback); anything else re-raises
            if not is_compiler_error(exc):
                raise
            error = exc
        for p in self.model.model.parameters():
            p.grad = None
        if any_rank(error is not None, self.dist):
            reason = describe(error) if error is not None else "on another rank"
            logger.warning(
                "torch.compile failed at the first step (%s); every rank continues uncompiled", reason
            )
            self.model.uncompile()
            for opt in self.optimizers:  # "uncompiled" means the optimizer step too: one code path per run
                if isinstance(opt, ShardedMuon):
                    opt.compile_ns = False

    def _batches(self, i: int) -> list[Batch]:
        """The step's micro-batches; during the sequence-length warmup, the same tokens in shorter rows."""
        batches = [next(self.loader) for _ in range(self.batch.grad_accum_steps)]
        length = self.train.seq_len_at(i)
        if length != self.batch.seq_len:
            batches = [(x.reshape(-1, length), y.reshape(-1, length)) for x, y in batches]
        return batches

    def _skip_reason(self, rank_losses: list[float], norm: float) -> str | None:
        """Why the update is not applied, or None."""
        if not all(math.isfinite(v) for v in rank_losses):
            return "non-finite loss"
        if not math.isfinite(norm):
            return "non-finite grad norm"
        threshold = self.train.explode_threshold
        if threshold is not None and norm > threshold:
            return f"grad norm {norm:.3g} > explode_threshold {threshold:g}"
        return None

    def run(self, step: int) -> dict[str, Any]:
        """Optimizer step `step` + 1 (possibly skipped); returns its metrics record."""
        t0 = time.perf_counter()
        i = step - self.run_start_step  # position inside this run: the LR and row-length schedules' clock
        mult = lr_multiplier(i, self.train.steps, self.lr)
        set_lr_multiplier(self.optimizers, mult)
        batches = self._batches(i)
        if self.model.compiled and not self._compile_checked:
            self._check_compile(*batches[0])
        local_loss = self._forward_backward(batches)

        params = [p for p in self.model.model.parameters() if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm(
            [p.grad for p in params if p.grad is not None], foreach=True
        )
        # Every rank's local loss, on every rank: the logged loss is their mean (the global loss).
        rank_losses = all_gather_scalar(local_loss, self.dist)
        loss = sum(rank_losses) / len(rank_losses)
        norm = float(grad_norm)
        reason = self._skip_reason(rank_losses, norm)
        counters = self.counters
        if reason is None:
            if self.train.grad_clip is not None:
                torch.nn.utils.clip_grads_with_norm_(params, self.train.grad_clip, grad_norm, foreach=True)
            for opt in self.optimizers:
                opt.step()
            counters.consecutive_skips = 0
            counters.tokens_trained += self.batch.tokens_per_step
        else:
            counters.skipped_total += 1
            counters.consecutive_skips += 1
            logger.warning(
                "step %d skipped: %s (loss %.4g); %d in a row, %d in total",
                step + 1,
                reason,
                loss,
                counters.consecutive_skips,
                counters.skipped_total,
            )
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        if self.dist.device.type == "cuda":
            torch.cuda.synchronize(self.dist.device)
        dt = time.perf_counter() - t0
        counters.run_tokens += self.batch.tokens_per_step
        return self._record(step + 1, loss, mult, norm, dt, rank_losses, reason)

    def _record(
        self,
        step: int,
        loss: float,
        mult: float,
        norm: float,
        dt: float,
        rank_losses: list[float],
        reason: str | None,
    ) -> dict[str, Any]:
        tokens_per_s = self.batch.tokens_per_step / dt
        flops_per_s = tokens_per_s * self.flops_per_token
        peak = self.peak_flops
        record = {
            "type": "train",
            "step": step,
            "start_step": self.run_start_step,
            "end_step": self.end_step,
            "loss": loss,
            "lr_mult": mult,
            "grad_norm": norm,
            "tokens": self.counters.run_tokens,
            "tokens_per_s": tokens_per_s,
            "flops_per_s": flops_per_s,
            "mfu": flops_per_s / (peak * self.dist.world_size) if peak else None,
            "skipped": self.counters.skipped_total,
            "peak_mem_mb": self.memory.peak_mb(),
        }
        if self.dist.is_distributed:
            record["rank_losses"] = rank_losses
        if reason is not None:
            record["skip_reason"] = reason
        return record
