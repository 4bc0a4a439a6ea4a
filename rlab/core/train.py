"""Continued pretraining (or from-scratch training) of one tag: the torchrun worker.

Reads one resolved `RunConfig` JSON (written by the orchestrator) and declares no flags of its own:

    python -m rlab.core.train results/exp/runs/d20-pi/run.json                       # one process
    torchrun --nproc_per_node=8 -m rlab.core.train results/exp/runs/d20-pi/run.json  # 8 GPUs (NCCL)
    torchrun --nproc_per_node=2 -m rlab.core.train run.json                          # 2 CPU procs (gloo)

What one run does:
1. joins the torchrun job (`rlab.core.distributed`), sets the allocator config before CUDA starts;
2. checks the batch arithmetic: total_batch_size = device_batch_size x seq_len x world_size x grad_accum;
3. builds the model: from scratch, from `init` (weights at a step, the variant's RoPE, the new
   sequence_len), or with `resume: true` from the newest complete checkpoint this run wrote;
4. trains with DDP gradient averaging, Muon + AdamW, warmup / constant / warmdown, grad-norm
   clipping and skipping of non-finite or exploding steps;
5. logs the global (all-reduced) loss and throughput every step to `metrics.jsonl`, the
   tracker and a progress bar, runs val BPB under no_grad and saves checkpoints on their cadences.

Resume restores model, optimizer, LR-schedule position, RNG and data position, so the steps that
follow match an uninterrupted run. The optimizer state is sharded across ranks (`train.shard_optimizer`)
and each rank writes its own optimizer file; the set loads at any world size, so a run saved with 2
processes resumes with 1 and the reverse.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rlab import __version__
from rlab.core.checkpoint_meta import (
    CheckpointMeta,
    LoaderState,
    ModelShape,
    OptimizerRecord,
    RunConfigRecord,
    TrainState,
)
from rlab.core.distributed import DistInfo
from rlab.core.train_start import StartPoint, resolve_start, run_key, start_optimizers  # noqa: F401
from rlab.errors import SpecError, TrainingError
from rlab.paths import BaseLayout, optim_file
from rlab.provenance import code_version
from rlab.spec.run import RunConfig
from rlab.spec.train import TrainSpec

logger = logging.getLogger("rlab.core.train")  # also when run as __main__

RLAB_VERSION = __version__
SAMPLE_PROMPT = "The"
SAMPLE_TOKENS = 24


# ----- batch arithmetic --------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchPlan:
    device_batch_size: int
    seq_len: int
    world_size: int
    grad_accum_steps: int

    @property
    def tokens_per_micro_step(self) -> int:
        return self.device_batch_size * self.seq_len * self.world_size

    @property
    def tokens_per_step(self) -> int:
        return self.tokens_per_micro_step * self.grad_accum_steps


def plan_batch(spec: TrainSpec, world_size: int) -> BatchPlan:
    """Gradient-accumulation steps for the global batch, or a one-line SpecError when it does not divide."""
    per_micro = spec.device_batch_size * spec.seq_len * world_size
    total = spec.total_batch_size
    if total is None:
        return BatchPlan(spec.device_batch_size, spec.seq_len, world_size, 1)
    if total % per_micro:
        lower = max(per_micro, total // per_micro * per_micro)
        raise SpecError(
            f"train.total_batch_size={total} tokens is not a multiple of device_batch_size x seq_len x "
            f"world_size = {spec.device_batch_size} x {spec.seq_len} x {world_size} = {per_micro} tokens.",
            hint=f"Use a multiple of {per_micro} (e.g. {lower} or {lower + per_micro}), "
            "or change train.device_batch_size / the number of processes.",
        )
    return BatchPlan(spec.device_batch_size, spec.seq_len, world_size, total // per_micro)


# ----- precision, compile --------------------------------------------------------------------------


def cpu_has_fast_bf16() -> bool:
    """AVX512-BF16 or AMX: bf16 matmuls run natively (several times the fp32 rate)."""
    import torch

    cpu = getattr(torch, "cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


def resolve_dtype(name: str, device: Any):
    """The autocast dtype (torch.bfloat16) or None for plain fp32; master weights always stay fp32."""
    import torch

    if name == "float32":
        return None
    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported()
    elif device.type == "cpu":
        supported = cpu_has_fast_bf16()
    else:
        supported = False
    if name == "bfloat16":
        if not supported:
            logger.warning("train.dtype=bfloat16 on %s without native bf16 support: it will be slow", device)
        return torch.bfloat16
    return torch.bfloat16 if supported else None


def autocast_context(device: Any, amp_dtype: Any) -> contextlib.AbstractContextManager:
    import torch

    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


# ----- in-training evaluation ----------------------------------------------------------------------


def training_val_bpb(model, batches: Iterator, num_batches: int, token_bytes, info: DistInfo, amp) -> float:
    """Bits per byte on `num_batches` val batches (all ranks), under no_grad; special tokens excluded.

    A minimal, training-time version of the metric; `rlab.evals` holds the full evaluation.
    """
    import torch

    from rlab.core.bpb import score_tokens
    from rlab.core.distributed import all_reduce_sum

    sums = torch.zeros(2, dtype=torch.float64, device=info.device)  # [nats, bytes]
    for _ in range(num_batches):
        x, y = next(batches)  # (B, T) each
        with amp():
            nats, nbytes, _ = score_tokens(model, x, y, token_bytes)  # (B,) each
        sums += torch.stack([nats.sum(), nbytes.sum()])
    totals = all_reduce_sum(sums, info)
    return float(totals[0] / (math.log(2) * totals[1])) if totals[1] > 0 else float("nan")


def sample_text(
    model, tokenizer, device, amp, prompt: str = SAMPLE_PROMPT, max_tokens: int = SAMPLE_TOKENS
) -> str:
    """Greedy continuation of `prompt` (a quick look at what the model says; no KV cache needed at this size)."""
    import torch

    ids = tokenizer.encode(prompt, prepend=tokenizer.bos_token_id)
    x = torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)
    with torch.no_grad():
        for _ in range(max_tokens):
            with amp():
                logits = model(x[:, -model.config.sequence_len :], last_logits=True)  # (1, 1, V)
            nxt = logits[:, -1].float().argmax(dim=-1, keepdim=True)  # (1, 1)
            x = torch.cat([x, nxt], dim=1)
    return tokenizer.decode(x[0, 1:].tolist())


# ----- the loop ------------------------------------------------------------------------------------


class Trainer:
    """One run: set up in `__init__`, train in `run`. Split out of `train` to keep each step readable."""

    def __init__(self, cfg: RunConfig, info: DistInfo, on_model: Callable[[Any], None] | None = None):
        import torch

        from rlab.core.gpt import GPT, GPTConfig
        from rlab.core.metrics import MemoryMeter, MetricsWriter, device_peak_flops
        from rlab.core.precision import stream_dtype
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
        self.end_step = self.start.run_start_step + self.spec.steps

        # Model: identical on every rank (same seed; DDP also broadcasts rank 0's weights).
        torch.manual_seed(self.spec.seed)
        config = GPTConfig.from_dict(self.start.model_config)
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
            self._restore_rng,
            rank=info.rank if shard else 0,
            world_size=info.world_size if shard else 1,
            compile_ns=self.compile_wanted,
        )
        self.lr_spec = self.spec.lr.model_copy(update={"warmup_steps": self.lr_policy.warmup_steps})

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
        logger.info(
            "%s: %d params, world_size %d, batch %d x %d x %d ranks x %d accum = %d tokens/step, dtype %s, "
            "compile %s, steps %d -> %d",
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
            self.start.step,
            self.end_step,
        )
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

    def _make_loader(self, split: Literal["train", "val"], state: dict[str, Any] | None, after=None):
        from rlab.core.loader import TokenLoader

        return TokenLoader(
            self.layout.data_dir,
            self.tokenizer,
            split,
            self.plan.device_batch_size,
            self.plan.seq_len,
            rank=self.info.rank,
            world_size=self.info.world_size,
            device=self.device,
            seed=self.spec.seed,
            state=state,
            after=after,
        )

    def amp(self):
        return autocast_context(self.device, self.amp_dtype)

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

    def _rng_state(self) -> dict[str, Any]:
        import torch

        state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def _restore_rng(self, state: dict[str, Any] | None) -> None:
        import torch

        if not state:
            return
        torch.set_rng_state(state["torch"])
        random.setstate(state["python"])
        if "cuda" in state and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda"], self.device)

    # --- one step ---

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
        except Exception as exc:
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
        rank_losses = self._gather_scalar(local_loss)
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
                hint="Lower train.lr, set train.grad_clip or raise train.explode_threshold, then rerun with "
                "resume: true (it continues from the last good checkpoint).",
            )
        return record

    def _gather_scalar(self, value) -> list[float]:
        import torch
        import torch.distributed as dist

        if not self.info.is_distributed:
            return [float(value)]
        out = torch.zeros(self.info.world_size, device=self.device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # the newer name
        gather(out, value.reshape(1).float())
        return out.tolist()

    # --- evals, samples, checkpoints ---

    def evaluate(self, step: int) -> None:
        plan = self.plan
        num_batches = max(1, math.ceil(self.spec.eval_tokens / plan.tokens_per_micro_step))
        loader = self._make_loader("val", None)
        self.model.eval()
        try:
            bpb = training_val_bpb(self.model, loader, num_batches, self.token_bytes, self.info, self.amp)
        finally:
            loader.close()
            self.model.train()
        peak = self.memory.peak_mb()
        self.memory.release_cached()
        self.memory.reset()
        self.last_val_bpb = bpb
        logger.info("step %d: val bpb %.4f (peak memory this interval %.0f MB)", step, bpb, peak)
        record = {"type": "eval", "step": step, "val_bpb": bpb, "peak_mem_mb": peak}
        self.metrics.write(record)
        self.tracker.log({"val/bpb": bpb, "val/peak_mem_mb": peak}, step=step)

    def sample(self, step: int) -> None:
        if self.info.is_main:
            self.model.eval()
            try:
                text = sample_text(self.model, self.tokenizer, self.device, self.amp)
            finally:
                self.model.train()
            self.memory.release_cached()
            logger.info("step %d sample: %r", step, text)

    def save(self, step: int) -> None:
        """All ranks: gather loader state, check finiteness, write their optimizer file; rank 0 the rest."""
        import uuid

        import torch

        from rlab.core.checkpoint import (
            begin_checkpoint,
            nonfinite_tensors,
            prune_checkpoints,
            save_checkpoint,
            write_optim_file,
        )
        from rlab.core.distributed import barrier, broadcast_object, gather_objects
        from rlab.core.optim_shards import optimizer_shard, writes_file

        loader_state = LoaderState(
            world_size=self.info.world_size, ranks=gather_objects(self.loader.state_dict(), self.info)
        )
        model_state = self.model.state_dict()
        bad = nonfinite_tensors(model_state)  # replicas are identical, so every rank decides alike
        if bad:
            raise TrainingError(
                f"Refusing to save step {step} of {self.cfg.tag}: non-finite parameters ({', '.join(bad[:5])}).",
                hint="The previous checkpoint is untouched; lower the LR and resume from it.",
            )
        checksums = self._gather_scalar(
            torch.stack([p.detach().double().sum() for p in self.model.parameters()]).sum()
        )
        if len(set(checksums)) > 1:
            logger.error("replicas diverged at step %d: parameter checksums %s", step, checksums)
        payload = optimizer_shard(self.optimizers, self.info.rank)
        payload["save_id"] = broadcast_object(uuid.uuid4().hex, self.info)  # ties the ranks' files together
        payload["rng"] = self._rng_state()
        if self.info.is_main:
            begin_checkpoint(self.ckpt_dir, step)
        barrier(self.info)
        if not self.info.is_main and writes_file(self.optimizers, self.info.rank):
            write_optim_file(self.ckpt_dir, step, self.info.rank, payload)
        barrier(self.info)  # every other rank's file is in place before rank 0 completes the step
        if self.info.is_main:
            meta = self._meta(step, loader_state, payload, checksums)
            save_checkpoint(
                self.ckpt_dir, step, model_state, meta, payload, optim_files=int(payload["world_size"])
            )
            self.written_steps.append(step)
            if self.spec.keep_last is not None:
                candidates = [s for s in self.written_steps if s not in self.start.protected_steps]
                for gone in prune_checkpoints(self.ckpt_dir, self.spec.keep_last, candidates):
                    self.written_steps.remove(gone)
        barrier(self.info)

    def _meta(
        self, step: int, loader_state: LoaderState, optim: dict[str, Any], checksums: list[float]
    ) -> CheckpointMeta:
        cfg = self.cfg
        files = int(optim["world_size"])
        return CheckpointMeta(
            step=step,
            val_bpb=self.last_val_bpb,
            shape=ModelShape(**self.model.config.nanochat_dict()),  # nanochat's GPTConfig takes exactly these
            # nanochat's own keys, so its tools read our checkpoints
            device_batch_size=self.plan.device_batch_size,
            max_seq_len=self.plan.seq_len,
            architecture=self.model.config.architecture,
            rope=self.model.rope,
            lineage=self.start.lineage,
            tag=cfg.tag,
            variant=cfg.variant,
            tokens_trained=self.tokens_trained,
            loader_state=loader_state,
            data_start=self.start.data_start,
            run_config=RunConfigRecord.model_validate(cfg.model_dump(mode="json")),
            optimizer=OptimizerRecord(
                format=optim["format"],
                files=[optim_file(self.ckpt_dir, step, r).name for r in range(files)],
                sharded=files > 1,  # one file per rank, each rank's share; loads at any world size
                save_id=optim["save_id"],
                at_start=self.start.optimizer_note,
                imported=self.start.optimizer_import,
            ),
            world_size=self.info.world_size,
            rlab_version=RLAB_VERSION,
            code_version=code_version(),
            train_state=TrainState(
                run_key=run_key(cfg),
                run_start_step=self.start.run_start_step,
                end_step=self.end_step,
                skipped_total=self.skipped_total,
                run_tokens=self.run_tokens,
                lr_policy=self.lr_policy,
                resumed_from=self.start.resumed_from,
                dtype="bfloat16" if self.amp_dtype is not None else "float32",
            ),
            replica_param_checksums=checksums,  # identical when DDP kept the replicas in sync
        )

    # --- failures ---

    def _explained(self, fn: Callable[[int], Any], step: int, arg: int) -> Any:
        """`fn(arg)`, with an out-of-memory or distributed failure re-raised as one line naming this rank
        (and, for memory, the plan's device batch that fits; `rlab.core.step_failures`)."""
        from rlab.core.step_failures import distributed_error, is_distributed_error, is_oom

        try:
            return fn(arg)
        except Exception as exc:
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
                last = done == end
                if spec.eval_every is not None and (done % spec.eval_every == 0 or last):
                    self._explained(self.evaluate, done, done)
                if spec.sample_every is not None and (done % spec.sample_every == 0 or last):
                    self._explained(self.sample, done, done)
                if last or (spec.save_every is not None and done % spec.save_every == 0):
                    self._explained(self.save, done, done)
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
                }
            )
            self.tracker.finish(1)
            raise
        finally:
            gc.unfreeze()  # a caller in the same process (tests, notebooks) gets its collector back
            kernels.close()
            progress.close()
            self.loader.close()
            self.metrics.close()


def train(cfg: RunConfig, *, on_model: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Run one training job (this process's share of it); returns {"step", "val_bpb", "skipped"}.

    `on_model(model)` is called once the model is built, before training (e.g. to attach hooks).
    """
    from rlab.core.distributed import (
        configure_allocator,
        init_distributed,
        shutdown_distributed,
        verify_allocator,
    )

    alloc_conf = configure_allocator()  # before anything initialises CUDA
    info = init_distributed()
    finished = False
    try:
        alloc = verify_allocator(alloc_conf)
        if info.device.type == "cuda":
            logger.info("allocator: %s", alloc)
        try:
            trainer = Trainer(cfg, info, on_model=on_model)
        except Exception as exc:
            if info.is_main:  # the orchestrator's live table reads this file: say why nothing follows
                from rlab.core.metrics import MetricsWriter

                writer = MetricsWriter(Path(cfg.run_dir) / "metrics.jsonl", append=True)
                writer.write(
                    {
                        "type": "failed",
                        "step": None,
                        "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    }
                )
                writer.close()
            raise
        result = trainer.run()
        finished = True
        return result
    finally:
        shutdown_distributed(synchronize=finished)


def _train(path: Path) -> None:
    from rlab.spec.run import RunConfig, read_config

    train(read_config(path, RunConfig))


def main(argv: list[str]) -> int:
    """`python -m rlab.core.train RUN_JSON`: errors rendered by the shared worker entry point (rlab.worker)."""
    from rlab.worker import run_worker

    return run_worker(argv, "python -m rlab.core.train RUN_JSON", _train)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
