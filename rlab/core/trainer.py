"""The trainer of one run: built from its `RunConfig` in `__init__`, trained in `run`.

Setup here (start point, model, precision, optimizers, compile, loader, metrics) and the loop that calls the
step, evals, samples and saves on their cadences; the step itself (`rlab.core.train_step`), checkpoints
(`rlab.core.train_checkpoint`) and evals (`rlab.core.train_evals`) are parts the class is assembled from.
A step's out-of-memory or distributed failure is re-raised as one line naming the rank.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlab.core.batch_plan import plan_batch
from rlab.core.distributed import DistInfo
from rlab.core.divergence import DivergenceWatch
from rlab.core.heartbeat import HeartbeatThread
from rlab.core.precision import resolve_dtype, stream_dtype
from rlab.core.train_checkpoint import CheckpointSaving, restore_rng
from rlab.core.train_evals import TrainEvals
from rlab.core.train_start import resolve_start, start_optimizers
from rlab.core.train_step import TrainStep
from rlab.errors import Diverged, TrainingError
from rlab.paths import BaseLayout
from rlab.provenance import current_platform
from rlab.spec.run import RunConfig

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)


class Trainer(TrainStep, CheckpointSaving, TrainEvals):
    """One run: set up in `__init__`, train in `run`."""

    def __init__(self, cfg: RunConfig, info: DistInfo, on_model: Callable[[Any], None] | None = None):
        import torch

        from rlab.core.gpt import GPT
        from rlab.core.metrics import MemoryMeter, MetricsWriter, device_peak_flops
        from rlab.core.tokenizer import Tokenizer, load_token_bytes
        from rlab.tracking import make_tracker

        self.cfg, self.info, self.spec = cfg, info, cfg.train
        self.layout = BaseLayout(Path(cfg.base_dir))
        self.ckpt_dir = self.layout.checkpoint_dir(cfg.tag)
        self.plan = plan_batch(self.spec, info.world_size)
        self.device = info.device

        self.tokenizer = Tokenizer.from_directory(self.layout.tokenizer_dir)
        self.token_bytes = load_token_bytes(self.layout.tokenizer_dir, self.device)
        self.start = resolve_start(cfg, self.layout, self.tokenizer.vocab_size)
        # the stall watchdog's view of this rank, from here to the end of `run` (rlab.core.heartbeat)
        self.heartbeat = HeartbeatThread(
            Path(cfg.run_dir), info.rank, self.start.step, self.spec.stall_timeout_s
        )
        self.heartbeat.start()
        self.end_step = self.start.run_start_step + self.spec.steps

        # Model: identical on every rank (same seed; DDP also broadcasts rank 0's weights).
        torch.manual_seed(self.spec.seed)
        config = self.start.config
        model = GPT(config, rope=self.start.rope)
        if self.start.model_state is None:
            model.init_weights()
        else:
            model.load_nanochat_state_dict(self.start.model_state)
            self.start.model_state = None  # free the CPU copy
        self.model = model.to(self.device)
        self.amp_dtype = resolve_dtype(self.spec.dtype, self.device)
        # bf16 embeddings and residual stream on a GPU, as nanochat (before the optimizers see the parameters)
        self.model.set_stream_dtype(stream_dtype(self.device, self.amp_dtype))
        if on_model is not None:
            on_model(self.model)

        self.compile_wanted = (
            self.spec.compile if self.spec.compile is not None else self.device.type == "cuda"
        )
        shard = self.spec.shard_optimizer and info.is_distributed
        self.optimizers, self.lr_policy = start_optimizers(
            self.start,
            self.model,
            self.spec,
            config.n_embd,
            lambda state: restore_rng(state, self.device),
            rank=info.rank if shard else 0,
            world_size=info.world_size if shard else 1,
            compile_ns=self.compile_wanted,
        )
        self.lr_spec = self.spec.lr.model_copy(update={"warmup_steps": self.lr_policy.warmup_steps})

        # auto reaches the trainer only where no memory plan resolved it (continue's preflight does on GPUs)
        self.checkpointing = (
            "off" if self.spec.activation_checkpointing == "auto" else self.spec.activation_checkpointing
        )
        self.model.set_activation_checkpointing(self.checkpointing)
        for length in {self.plan.seq_len, *(p.seq_len for p in self.spec.seq_len_warmup)}:
            self.model.precompute_tables(length, self.device)  # outside the compiled region
        self.train_model = self._wrap_model()
        self.compiled = self.train_model is not self._eager_model
        self.compile_checked = False

        self.flops_per_token = self.model.estimate_flops()
        self.peak_flops = device_peak_flops(self.device, self.spec.peak_flops)
        self.memory = MemoryMeter(self.device)
        self.metrics = MetricsWriter(
            Path(cfg.run_dir) / "metrics.jsonl" if info.is_main else None,
            resumed_from=self.start.resumed_from,
        )
        self.tracker = make_tracker(
            cfg.tracking,
            cfg.experiment,
            cfg.tag,
            Path(cfg.run_dir),
            cfg.model_dump(mode="json"),
            info.is_main,
        )
        self.loader = self._make_loader("train", self.start.loader_state, after=self.start.loader_after)
        # cumulative counters, carried on from the checkpoint (never recomputed from step counts)
        self.skipped_total = self.start.skipped_total
        self.tokens_trained = self.start.tokens_trained
        self.run_tokens = self.start.run_tokens
        self.last_val_bpb: float | None = None
        self.written_steps: list[int] = []
        self.divergence = DivergenceWatch(
            vocab_size=config.vocab_size,
            after=self.spec.diverged_after,
            max_loss=self.spec.max_loss,
            warmup_steps=self.lr_spec.warmup_steps,
            run_start_step=self.start.run_start_step,
        )
        logger.info(
            "%s: %d params, world_size %d, batch %d x %d x %d ranks x %d accum = %d tokens/step, dtype %s, "
            "compile %s, activation checkpointing %s, steps %d -> %d",
            cfg.tag,
            sum(p.numel() for p in self.model.parameters()),
            info.world_size,
            self.plan.device_batch_size,
            self.plan.seq_len,
            info.world_size,
            self.plan.grad_accum_steps,
            self.plan.tokens_per_step,
            (
                f"bf16 autocast (fp32 master, {str(self.model.stream_dtype).removeprefix('torch.')} stream)"
                if self.amp_dtype
                else "fp32"
            ),
            self.compiled,
            self.checkpointing,
            self.start.step,
            self.end_step,
        )
        logger.info("platform: %s", current_platform(self.device).label)
        if self.spec.seq_len_warmup:
            logger.info(
                "sequence-length warmup: %s, then rows of %d",
                ", ".join(f"{p.steps} steps in rows of {p.seq_len}" for p in self.spec.seq_len_warmup),
                self.plan.seq_len,
            )

    # --- setup helpers ---

    def _wrap_model(self):
        import torch

        from rlab.core.distributed import wrap_ddp

        model = wrap_ddp(self.model, self.device) if self.info.is_distributed else self.model
        self._eager_model = model
        if not self.compile_wanted:
            return model
        try:
            # Fixed shapes (a row length is one graph; a warmup length another), as nanochat compiles.
            return torch.compile(model, dynamic=False)
        except Exception as exc:  # noqa: BLE001 - any backend failure means "run eager"
            logger.warning("torch.compile unavailable (%s); training uncompiled", exc)
            return model

    def _hold_attention_kernels(self, stack: contextlib.ExitStack) -> str:
        """Select the attention kernels for the run (held until `stack` closes); the line train.log shows."""
        import torch

        from rlab.core.attention_backends import attention_kernels, describe_attention

        c = self.model.config
        dtype = self.amp_dtype or torch.float32
        sdpa = stack.enter_context(attention_kernels(self.device, c.n_head, c.n_kv_head, c.head_dim, dtype))
        return describe_attention(
            sdpa,
            self.model.window_sizes,
            self.plan.seq_len,
            self.device,
            self.model.window_kernel,
            self.compiled,
        )

    # --- failures ---

    def _explained(self, fn: Callable[[int], Any], step: int, arg: int) -> Any:
        """`fn(arg)`, with an out-of-memory or distributed failure re-raised as one line naming this rank
        (and, for memory, the plan's device batch that fits; `rlab.core.step_failures`)."""
        from rlab.core.step_failures import distributed_error, is_distributed_error, is_oom

        try:
            return fn(arg)
        except Exception as exc:  # classified, then re-raised: OOM and distributed errors get one line
            if is_oom(exc):
                raise self._oom_error(exc, step) from exc
            if is_distributed_error(exc):
                raise distributed_error(exc, step, self.info) from exc
            raise

    def _oom_error(self, exc: BaseException, step: int) -> TrainingError:
        from rlab.core.step_failures import device_memory_gib, oom_error, plan_in_subprocess

        self.memory.release_cached()
        plan = plan_in_subprocess(self.memory_shape(), device_memory_gib(self.device))
        return oom_error(exc, step, self.info, plan)

    def _diverged(self, step: int, reason: str) -> Diverged:
        first = self.divergence.first_dead or step
        return Diverged(
            f"Stopped {self.cfg.tag} at step {step}: diverged ({self.divergence.streak} steps in a row since step "
            f"{first}; last: {reason}).",
            hint="Lower train.lr or set train.grad_clip, then " + self.resume_hint(before=first),
        )

    def memory_shape(self) -> dict[str, Any]:
        """This run's training shape as `rlab memory` takes it (`rlab.memory.shape.TrainShape`)."""
        config = {**self.model.config.nanochat_dict(), "architecture": self.model.config.architecture}
        return {
            "config": config,
            "seq_len": self.plan.seq_len,
            "device_batch_size": self.plan.device_batch_size,
            "nproc": self.info.world_size,
            "grad_accum_steps": self.plan.grad_accum_steps,
            "dtype": "bfloat16" if self.amp_dtype is not None else "float32",
            "device": "cuda" if self.device.type == "cuda" else "cpu",
            "compile": self.compiled,
            "shard_optimizer": bool(self.spec.shard_optimizer),
            "activation_checkpointing": self.checkpointing,
        }

    # --- the run ---

    def run(self) -> dict[str, Any]:
        from rlab.core.metrics import TrainProgress

        spec, start, end = self.spec, self.start.step, self.end_step
        self.consecutive_skips = 0
        if start >= end:
            logger.info("%s already trained to step %d; nothing to do", self.cfg.tag, start)
            self.metrics.write({"type": "done", "step": start})
            return {"step": start, "val_bpb": None, "skipped": self.skipped_total}
        progress = TrainProgress(self.info.is_main, start, end, self.cfg.tag)
        step = start
        kernels = contextlib.ExitStack()
        try:
            logger.info("attention: %s", self._hold_attention_kernels(kernels))
            self.model.train()
            self.memory.reset()
            for step in range(start, end):
                record = self._explained(self.train_step, step + 1, step)
                if step == start:
                    # Setup's objects (model, loader, compiled graphs) live for the whole run: collect once,
                    # then freeze them out of the collector's scans (nanochat saw ~500 ms pauses without).
                    gc.collect()
                    gc.freeze()
                    logger.debug("gc: %d objects frozen after the first step", gc.get_freeze_count())
                done = step + 1
                self.metrics.write(record)
                self.tracker.log(
                    {
                        f"train/{k}": v
                        for k, v in record.items()
                        if isinstance(v, (int, float)) and k != "type"
                    },
                    step=done,
                )
                progress.update(
                    done - start, f"loss {record['loss']:.4f} | {record['tokens_per_s']:,.0f} tok/s"
                )
                logger.debug(
                    "step %d loss %.4f lr_mult %.3f grad_norm %.3f",
                    done,
                    record["loss"],
                    record["lr_mult"],
                    record["grad_norm"],
                )
                self.heartbeat.stepped(done)
                dead = self.divergence.check(record)
                if dead is not None:
                    raise self._diverged(done, dead)
                last = done == end
                if spec.eval_every is not None and (done % spec.eval_every == 0 or last):
                    self._explained(self.evaluate, done, done)
                    self.heartbeat.stepped(done)
                if spec.sample_every is not None and (done % spec.sample_every == 0 or last):
                    self._explained(self.sample, done, done)
                    self.heartbeat.stepped(done)
                if last or (spec.save_every is not None and done % spec.save_every == 0):
                    self._explained(self.save, done, done)
                    self.heartbeat.stepped(done)
            step = end
            self.metrics.write(
                {"type": "done", "step": end, "skipped": self.skipped_total, "val_bpb": self.last_val_bpb}
            )
            self.tracker.finish(0)
            return {"step": end, "val_bpb": self.last_val_bpb, "skipped": self.skipped_total}
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
