"""One optimizer step of the trainer: gradient accumulation, the first compiled step's check, skipping.

A step forwards and backwards every micro-batch (DDP all-reduces on the last only), logs the global loss (the
mean of every rank's), and applies the optimizers unless the loss or gradient norm is non-finite or exploding;
too many skips in a row stop the run. The first compiled step runs once on its own so that a compiler error
on any rank makes every rank continue uncompiled (`TrainStep._check_compile`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any

from rlab.core.distributed import all_gather_scalar
from rlab.core.trainer_state import TrainerState
from rlab.errors import TrainingError

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)


class TrainStep(TrainerState):
    """The step, as a part of `rlab.core.trainer.Trainer`."""

    def _forward_backward(self, batches: list) -> Any:
        """Accumulate gradients over the micro-batches; returns this rank's mean loss (detached)."""
        import torch

        n = len(batches)
        total = torch.zeros((), device=self.device)
        for i, (x, y) in enumerate(batches):
            last = i == n - 1
            sync = contextlib.nullcontext()
            if self.info.is_distributed and not last:
                sync = self._eager_model.no_sync()  # all-reduce only on the last micro-step
            with sync:
                with self.amp():
                    loss = self.train_model(x, y)
                (loss / n).backward()
            total += loss.detach().float()
        return total / n

    def _step_losses(self, batches: list) -> Any:
        if self.compiled and not self.compile_checked:
            self._check_compile(*batches[0])
        return self._forward_backward(batches)

    def _check_compile(self, x, y) -> None:
        """The first compiled forward + backward (where compilation happens), on the first micro-batch with
        DDP's gradient sync off, so a rank whose compile failed leaves no other rank waiting in an all-reduce.

        A compiler error on any rank (an all-reduced flag) makes every rank continue uncompiled; any other
        error propagates. The gradients are dropped: the step itself runs next, as it would have.
        """
        from rlab.core.step_failures import any_rank, describe, is_compiler_error

        self.compile_checked = True
        error: BaseException | None = None
        sync = self._eager_model.no_sync() if self.info.is_distributed else contextlib.nullcontext()
        try:
            with sync:
                with self.amp():
                    loss = self.train_model(x, y)
                loss.backward()
        except Exception as exc:  # only a compiler error is kept (fallback); anything else re-raises
            if not is_compiler_error(exc):
                raise
            error = exc
        for p in self.model.parameters():
            p.grad = None
        if any_rank(error is not None, self.info):
            reason = describe(error) if error is not None else "on another rank"
            logger.warning(
                "torch.compile failed at the first step (%s); every rank continues uncompiled", reason
            )
            self.train_model, self.compiled = self._eager_model, False
            from rlab.core.muon import ShardedMuon

            for opt in self.optimizers:  # "uncompiled" means the optimizer step too: one code path per run
                if isinstance(opt, ShardedMuon):
                    opt.compile_ns = False

    def train_step(self, step: int) -> dict[str, Any]:
        """One optimizer step (possibly skipped); returns the metrics record."""
        import torch

        from rlab.core.optim import set_lr_multiplier
        from rlab.core.schedule import lr_multiplier

        t0 = time.perf_counter()
        i = (
            step - self.start.run_start_step
        )  # position inside this run: the LR and row-length schedules' clock
        mult = lr_multiplier(i, self.spec.steps, self.lr_spec)
        set_lr_multiplier(self.optimizers, mult)
        batches = [next(self.loader) for _ in range(self.plan.grad_accum_steps)]
        length = self.spec.seq_len_at(i)
        if length != self.plan.seq_len:  # sequence-length warmup: the same tokens in shorter rows
            batches = [(x.reshape(-1, length), y.reshape(-1, length)) for x, y in batches]
        local_loss = self._step_losses(batches)

        params = [p for p in self.model.parameters() if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm(
            [p.grad for p in params if p.grad is not None], foreach=True
        )
        # Every rank's local loss, on every rank: the logged loss is their mean (the global loss).
        rank_losses = all_gather_scalar(local_loss, self.info)
        loss = sum(rank_losses) / len(rank_losses)
        norm = float(grad_norm)
        reason = None
        if not all(math.isfinite(v) for v in rank_losses):
            reason = "non-finite loss"
        elif not math.isfinite(norm):
            reason = "non-finite grad norm"
        elif self.spec.explode_threshold is not None and norm > self.spec.explode_threshold:
            reason = f"grad norm {norm:.3g} > explode_threshold {self.spec.explode_threshold:g}"
        if reason is None:
            if self.spec.grad_clip is not None:
                torch.nn.utils.clip_grads_with_norm_(params, self.spec.grad_clip, grad_norm, foreach=True)
            for opt in self.optimizers:
                opt.step()
            self.consecutive_skips = 0
            self.tokens_trained += self.plan.tokens_per_step
        else:
            self.skipped_total += 1
            self.consecutive_skips += 1
            logger.warning(
                "step %d skipped: %s (loss %.4g); %d in a row, %d in total",
                step + 1,
                reason,
                loss,
                self.consecutive_skips,
                self.skipped_total,
            )
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        dt = time.perf_counter() - t0
        self.run_tokens += self.plan.tokens_per_step

        tokens_per_s = self.plan.tokens_per_step / dt
        flops_per_s = tokens_per_s * self.flops_per_token
        record = {
            "type": "train",
            "step": step + 1,
            "start_step": self.start.run_start_step,
            "end_step": self.end_step,
            "loss": loss,
            "lr_mult": mult,
            "grad_norm": norm,
            "tokens": self.run_tokens,
            "tokens_per_s": tokens_per_s,
            "flops_per_s": flops_per_s,
            "mfu": flops_per_s / (self.peak_flops * self.info.world_size) if self.peak_flops else None,
            "skipped": self.skipped_total,
            "peak_mem_mb": self.memory.peak_mb(),
        }
        if self.info.is_distributed:
            record["rank_losses"] = rank_losses
        if reason is not None:
            record["skip_reason"] = reason
        if self.consecutive_skips >= self.spec.max_consecutive_skips:
            self.metrics.write(record)
            raise TrainingError(
                f"Stopped {self.cfg.tag} at step {step + 1}: {self.consecutive_skips} consecutive steps skipped "
                f"(last: {reason}).",
                hint="Lower train.lr, set train.grad_clip or raise train.explode_threshold, then "
                + self.resume_hint(),
            )
        return record
