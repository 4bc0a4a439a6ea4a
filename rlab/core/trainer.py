"""The trainer of one run: its parts built from its `RunConfig` in `__init__`, trained in `run`.

The trainer holds its parts, each built from what it uses: the model and its wrappers (`rlab.core.train_model`),
the step runner (`rlab.core.train_step`), the checkpoint saver (`rlab.core.train_checkpoint`), the in-training
evals (`rlab.core.train_evals`), the stop rules (`rlab.core.train_guard`) and the heartbeat
(`rlab.core.heartbeat`). The loop here calls the step, evals, samples and saves on their cadences. A step's
out-of-memory or distributed failure is re-raised as one line naming the rank.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch.optim import Optimizer

from rlab.core.batch_plan import plan_batch
from rlab.core.checkpoint_meta import LrPolicy
from rlab.core.distributed import DistInfo
from rlab.core.divergence import DivergenceWatch
from rlab.core.gpt import GPT
from rlab.core.heartbeat import HeartbeatThread
from rlab.core.loader import TokenLoader
from rlab.core.metrics import MemoryMeter, MetricsWriter, TrainProgress, device_peak_flops
from rlab.core.precision import Precision, resolve_dtype
from rlab.core.step_failures import (
    device_memory_gib,
    distributed_error,
    is_distributed_error,
    is_oom,
    oom_error,
    plan_in_subprocess,
)
from rlab.core.tokenizer import Tokenizer, load_token_bytes
from rlab.core.train_checkpoint import CheckpointSaver, restore_rng
from rlab.core.train_evals import TrainingEvals
from rlab.core.train_guard import RunGuard
from rlab.core.train_model import build_model, wrap_model
from rlab.core.train_start import resolve_start, start_optimizers
from rlab.core.train_step import RunCounters, StepRunner
from rlab.memory.shape import TrainShape
from rlab.paths import BaseLayout
from rlab.provenance import current_platform
from rlab.spec.run import RunConfig
from rlab.tracking import make_tracker

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)

T = TypeVar("T")


class Trainer:
    """One run: its parts set up in `__init__`, trained in `run`."""

    def __init__(self, run: RunConfig, dist: DistInfo, on_model: Callable[[GPT], None] | None = None):
        self.run_config, self.dist, train = run, dist, run.train
        layout = BaseLayout(Path(run.base_dir))
        self.batch = plan_batch(train, dist.world_size)
        tokenizer = Tokenizer.from_directory(layout.tokenizer_dir)
        token_bytes = load_token_bytes(layout.tokenizer_dir, dist.device)
        self.start = resolve_start(run, layout, tokenizer.vocab_size)
        # the stall watchdog's view of this rank, from here to the end of `run` (rlab.core.heartbeat)
        self.heartbeat = HeartbeatThread(
            Path(run.run_dir), dist.rank, self.start.step, train.stall_timeout_s
        ).start()
        self.end_step = self.start.run_start_step + train.steps
        self.precision = Precision(dist.device, resolve_dtype(train.dtype, dist.device))
        model = build_model(self.start, train.seed, self.precision)
        if on_model is not None:
            on_model(model)
        compile_wanted = train.compile if train.compile is not None else dist.device.type == "cuda"
        optimizers, lr_policy = self._start_optimizers(model, compile_wanted)
        # auto reaches the trainer only where no memory plan resolved it (continue's preflight does on GPUs)
        checkpointing = "off" if train.activation_checkpointing == "auto" else train.activation_checkpointing
        lengths = {self.batch.seq_len, *(p.seq_len for p in train.seq_len_warmup)}
        self.model = wrap_model(model, dist, compile_wanted, checkpointing, lengths)
        flops = model.estimate_flops(), device_peak_flops(dist.device, train.peak_flops)
        self.memory = MemoryMeter(dist.device)
        self.metrics = MetricsWriter(
            Path(run.run_dir) / "metrics.jsonl" if dist.is_main else None,
            resumed_from=self.start.resumed_from,
        )
        config = run.model_dump(mode="json")
        self.tracker = make_tracker(
            run.tracking, run.experiment, run.tag, Path(run.run_dir), config, dist.is_main
        )
        # this rank's loader of a split, given the split (and for train, where it starts)
        loaders = partial(
            TokenLoader,
            layout.data_dir,
            tokenizer,
            batch_size=self.batch.device_batch_size,
            seq_len=self.batch.seq_len,
            rank=dist.rank,
            world_size=dist.world_size,
            device=dist.device,
            seed=train.seed,
        )
        redraw = train.seed if train.data_draw else None  # a seed replicate reads its own draw of the data
        self.loader = loaders(
            "train", state=self.start.loader_state, after=self.start.loader_after, redraw_seed=redraw
        )
        self.counters = RunCounters(
            tokens_trained=self.start.tokens_trained,
            run_tokens=self.start.run_tokens,
            skipped_total=self.start.skipped_total,
        )
        self.steps = self._step_runner(optimizers, lr_policy, *flops)
        self.saver = self._saver(layout.checkpoint_dir(run.tag), optimizers, lr_policy)
        self.evals = self._evals(tokenizer, token_bytes, loaders)
        divergence = DivergenceWatch(
            vocab_size=model.config.vocab_size,
            after=train.diverged_after,
            max_loss=train.max_loss,
            warmup_steps=lr_policy.warmup_steps,
            run_start_step=self.start.run_start_step,
        )
        self.guard = RunGuard(run.tag, self.saver.ckpt_dir, train.max_consecutive_skips, divergence)
        self._log_setup()

    # --- setup helpers ---

    def _start_optimizers(self, model: GPT, compile_wanted: bool) -> tuple[list[Optimizer], LrPolicy]:
        """The optimizers, their state loaded as the start point says (`rlab.core.train_start`)."""
        train, dist = self.run_config.train, self.dist
        shard = train.shard_optimizer and dist.is_distributed
        return start_optimizers(
            self.start,
            model,
            train,
            self.start.config.n_embd,
            lambda state: restore_rng(state, dist.device),
            rank=dist.rank if shard else 0,
            world_size=dist.world_size if shard else 1,
            compile_ns=compile_wanted,
        )

    def _step_runner(
        self,
        optimizers: list[Optimizer],
        lr_policy: LrPolicy,
        flops_per_token: float,
        peak_flops: float | None,
    ) -> StepRunner:
        train = self.run_config.train
        return StepRunner(
            model=self.model,
            optimizers=optimizers,
            loader=self.loader,
            batch=self.batch,
            train=train,
            lr=train.lr.model_copy(update={"warmup_steps": lr_policy.warmup_steps}),
            run_start_step=self.start.run_start_step,
            end_step=self.end_step,
            dist=self.dist,
            precision=self.precision,
            flops_per_token=flops_per_token,
            peak_flops=peak_flops,
            memory=self.memory,
            counters=self.counters,
        )

    def _saver(self, ckpt_dir: Path, optimizers: list[Optimizer], lr_policy: LrPolicy) -> CheckpointSaver:
        return CheckpointSaver(
            run=self.run_config,
            ckpt_dir=ckpt_dir,
            dist=self.dist,
            start=self.start,
            end_step=self.end_step,
            lr_policy=lr_policy,
            precision=self.precision,
            model=self.model.model,
            optimizers=optimizers,
            loader=self.loader,
            batch=self.batch,
            counters=self.counters,
        )

    def _evals(
        self, tokenizer: Tokenizer, token_bytes: torch.Tensor, loaders: Callable[..., TokenLoader]
    ) -> TrainingEvals:
        val_tokens = self.run_config.train.eval_tokens
        return TrainingEvals(
            model=self.model.model,
            tokenizer=tokenizer,
            token_bytes=token_bytes,
            dist=self.dist,
            precision=self.precision,
            open_val=partial(loaders, "val"),
            val_batches=max(1, math.ceil(val_tokens / self.batch.tokens_per_micro_step)),
            memory=self.memory,
            metrics=self.metrics,
            tracker=self.tracker,
        )

    def _log_setup(self) -> None:
        """train.log's opening lines: the shape, batch, numerics and steps of the run."""
        model, batch, train = self.model.model, self.batch, self.run_config.train
        logger.info(
            "%s: %d params, world_size %d, batch %d x %d x %d ranks x %d accum = %d tokens/step, dtype %s, "
            "compile %s, activation checkpointing %s, steps %d -> %d",
            self.run_config.tag,
            sum(p.numel() for p in model.parameters()),
            self.dist.world_size,
            batch.device_batch_size,
            batch.seq_len,
            self.dist.world_size,
            batch.grad_accum_steps,
            batch.tokens_per_step,
            (
                f"bf16 autocast (fp32 master, {str(model.stream_dtype).removeprefix('torch.')} stream)"
                if self.precision.amp_dtype
                else "fp32"
            ),
            self.model.compiled,
            self.model.checkpointing,
            self.start.step,
            self.end_step,
        )
        logger.info("platform: %s", current_platform(self.dist.device).label)
        if train.seq_len_warmup:
            logger.info(
                "sequence-length warmup: %s, then rows of %d",
                ", ".join(f"{p.steps} steps in rows of {p.seq_len}" for p in train.seq_len_warmup),
                batch.seq_len,
            )

    # --- failures ---

    def _explained(self, fn: Callable[[int], T], step: int, arg: int) -> T:
        """`fn(arg)`, with an out-of-memory or distributed failure re-raised as one line naming this rank
        (and, for memory, the plan's device batch that fits; `rlab.core.step_failures`)."""
        try:
            return fn(arg)
        except Exception as exc:  # classified, then re-raised: OOM and distributed errors get one line
            if is_oom(exc):
                self.memory.release_cached()
                plan = plan_in_subprocess(self.memory_shape(), device_memory_gib(self.dist.device))
                raise oom_error(exc, step, self.dist, plan) from exc
            if is_distributed_error(exc):
                raise distributed_error(exc, step, self.dist) from exc
            raise

    def memory_shape(self) -> TrainShape:
        """This run's training shape as `rlab memory` plans it."""
        batch = self.batch
        return TrainShape(
            config=self.model.model.config,
            seq_len=batch.seq_len,
            device_batch_size=batch.device_batch_size,
            nproc=self.dist.world_size,
            grad_accum_steps=batch.grad_accum_steps,
            dtype=self.precision.dtype_name,
            device="cuda" if self.dist.device.type == "cuda" else "cpu",
            compile=self.model.compiled,
            shard_optimizer=bool(self.run_config.train.shard_optimizer),
            activation_checkpointing=self.model.checkpointing,
        )

    # --- the run ---

    def run(self) -> dict[str, Any]:
        """Train from the start point to `end_step`; returns {"step", "val_bpb", "skipped"}."""
        start, end, counters = self.start.step, self.end_step, self.counters
        if start >= end:
            logger.info("%s already trained to step %d; nothing to do", self.run_config.tag, start)
            self.metrics.write({"type": "done", "step": start})
            return {"step": start, "val_bpb": None, "skipped": counters.skipped_total}
        progress = TrainProgress(self.dist.is_main, start, end, self.run_config.tag)
        step = start
        kernels = contextlib.ExitStack()
        try:
            held = self.model.hold_attention_kernels(kernels, self.precision, self.batch.seq_len)
            logger.info("attention: %s", held)
            self.model.model.train()
            self.memory.reset()
            for step in range(start, end):
                self._train_step(step, progress)
            step = end
            self.metrics.write(
                {
                    "type": "done",
                    "step": end,
                    "skipped": counters.skipped_total,
                    "val_bpb": counters.last_val_bpb,
                }
            )
            self.tracker.finish(0)
            return {"step": end, "val_bpb": counters.last_val_bpb, "skipped": counters.skipped_total}
        except BaseException as exc:
            self.metrics.write(
                {
                    "type": "failed",
                    "step": step,
                    "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    "kind": getattr(exc, "failure_kind", None),
                }
            )
            self.tracker.finish(1)
            raise
        finally:
            gc.unfreeze()  # a caller in the same process (tests, notebooks) gets its collector back
            self.heartbeat.stop()
            kernels.close()
            progress.close()
            self.loader.close()
            self.metrics.close()

    def _train_step(self, step: int, progress: TrainProgress) -> None:
        """Step `step` + 1: its record written, tracked and shown, the stop rules checked, then what is due."""
        record = self._explained(self.steps.run, step + 1, step)
        if step == self.start.step:
            # Setup's objects (model, loader, compiled graphs) live for the whole run: collect once,
            # then freeze them out of the collector's scans (nanochat saw ~500 ms pauses without).
            gc.collect()
            gc.freeze()
            logger.debug("gc: %d objects frozen after the first step", gc.get_freeze_count())
        done = step + 1
        self.metrics.write(record)
        self.guard.check_skips(record, self.counters.consecutive_skips)
        self.tracker.log(
            {f"train/{k}": v for k, v in record.items() if isinstance(v, (int, float)) and k != "type"},
            step=done,
        )
        progress.update(
            done - self.start.step, f"loss {record['loss']:.4f} | {record['tokens_per_s']:,.0f} tok/s"
        )
        logger.debug(
            "step %d loss %.4f lr_mult %.3f grad_norm %.3f",
            done,
            record["loss"],
            record["lr_mult"],
            record["grad_norm"],
        )
        self.heartbeat.stepped(done)
        self.guard.check_divergence(record)
        self._due(done)

    def _due(self, done: int) -> None:
        """The eval, sample and save due after step `done`, each followed by a heartbeat."""
        train, last = self.run_config.train, done == self.end_step
        if train.eval_every is not None and (done % train.eval_every == 0 or last):
            self.counters.last_val_bpb = self._explained(self.evals.evaluate, done, done)
            self.heartbeat.stepped(done)
        if train.sample_every is not None and (done % train.sample_every == 0 or last):
            self._explained(self.evals.sample, done, done)
            self.heartbeat.stepped(done)
        if last or (train.save_every is not None and done % train.save_every == 0):
            self._explained(self.saver.save, done, done)
            self.heartbeat.stepped(done)
