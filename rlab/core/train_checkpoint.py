"""Checkpoints written during training, and the RNG state they carry.

Every rank takes part in a save: the loader positions are gathered, the weights checked (finite, within
`rlab.core.checkpoint.MAX_HEALTHY_WEIGHT`, finite checksums: only healthy checkpoints are written) and the replicas
compared by checksum, and each rank writes its share of the optimizer state; rank 0 writes the
weights and the typed meta (`rlab.core.checkpoint_meta.CheckpointMeta`) that resume, evals and reports read.
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.optim import Optimizer

from rlab import __version__
from rlab.core.batch_plan import BatchPlan
from rlab.core.checkpoint import (
    begin_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    unhealthy_tensors,
    write_optim_file,
)
from rlab.core.checkpoint_meta import (
    CheckpointMeta,
    LoaderState,
    LrPolicy,
    ModelShape,
    OptimizerRecord,
    RunConfigRecord,
    TrainState,
)
from rlab.core.distributed import DistInfo, all_gather_scalar, barrier, broadcast_object, gather_objects
from rlab.core.gpt import GPT
from rlab.core.loader import TokenLoader
from rlab.core.optim_shards import optimizer_shard, writes_file
from rlab.core.precision import Precision
from rlab.core.train_start import StartPoint, run_key
from rlab.core.train_step import RunCounters
from rlab.errors import TrainingError
from rlab.paths import checkpoint_steps, optim_file
from rlab.provenance import code_version, current_platform
from rlab.spec.run import RunConfig

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)

RLAB_VERSION = __version__


def rng_state(device: torch.device) -> dict[str, Any]:
    """torch's, Python's and (on a GPU) CUDA's generator states, saved with each rank's optimizer file."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any] | None, device: torch.device) -> None:
    """Put back what `rng_state` saved (nothing when the checkpoint has none)."""
    if not state:
        return
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


def resume_hint(ckpt_dir: Path, before: int | None = None) -> str:
    """What to rerun with: the newest checkpoint of the tag (every one a save wrote is healthy), older than
    step `before` when given."""
    steps = [s for s in checkpoint_steps(ckpt_dir) if before is None or s < before]
    if not steps:
        return "rerun it from the start (--force): no checkpoint of this run is older."
    return f"resume from step {steps[-1]}, the newest healthy checkpoint: --resume --resume-from {steps[-1]}."


@dataclass
class CheckpointSaver:
    """Writes one run's checkpoints: its model, optimizers and loader position, with the counters and where
    the run started (`start`) in the meta; keeps the newest `train.keep_last`."""

    run: RunConfig
    ckpt_dir: Path
    dist: DistInfo
    start: StartPoint
    end_step: int
    lr_policy: LrPolicy
    precision: Precision
    model: GPT
    optimizers: list[Optimizer]
    loader: TokenLoader
    batch: BatchPlan
    counters: RunCounters
    written_steps: list[int] = field(default_factory=list)
    """The steps this run saved and has not pruned."""

    def save(self, step: int) -> None:
        """All ranks: gather loader state, check finiteness, write their optimizer file; rank 0 the rest."""
        dist = self.dist
        loader_state = LoaderState(
            world_size=dist.world_size, ranks=gather_objects(self.loader.state_dict(), dist)
        )
        model_state = self.model.state_dict()
        checksums = all_gather_scalar(
            torch.stack([p.detach().double().sum() for p in self.model.parameters()]).sum(), dist
        )
        self._refuse_unhealthy(step, model_state, checksums)
        if len(set(checksums)) > 1:
            logger.error("replicas diverged at step %d: parameter checksums %s", step, checksums)
        payload = optimizer_shard(self.optimizers, dist.rank)
        payload["save_id"] = broadcast_object(uuid.uuid4().hex, dist)  # ties the ranks' files together
        payload["rng"] = rng_state(dist.device)
        if dist.is_main:
            begin_checkpoint(self.ckpt_dir, step)
        barrier(dist)
        if not dist.is_main and writes_file(self.optimizers, dist.rank):
            write_optim_file(self.ckpt_dir, step, dist.rank, payload)
        barrier(dist)  # every other rank's file is in place before rank 0 completes the step
        if dist.is_main:
            meta = self._meta(step, loader_state, payload, checksums)
            save_checkpoint(
                self.ckpt_dir, step, model_state, meta, payload, optim_files=int(payload["world_size"])
            )
            self._keep_last(step)
        barrier(dist)

    def _refuse_unhealthy(
        self, step: int, model_state: dict[str, torch.Tensor], checksums: list[float]
    ) -> None:
        """Only healthy checkpoints: a resume must never start from exploded weights (the replicas are
        identical, so every rank decides alike)."""
        bad = unhealthy_tensors(model_state)
        if not bad and not all(math.isfinite(c) for c in checksums):
            bad = [f"parameter checksums {checksums}"]
        if bad:
            raise TrainingError(
                f"Refusing to save step {step} of {self.run.tag}: unhealthy weights ({', '.join(bad[:5])}).",
                hint="Nothing of this step was written. Lower train.lr or set train.grad_clip, then "
                + resume_hint(self.ckpt_dir),
            )

    def _keep_last(self, step: int) -> None:
        self.written_steps.append(step)
        keep = self.run.train.keep_last
        if keep is not None:
            candidates = [s for s in self.written_steps if s not in self.start.protected_steps]
            for gone in prune_checkpoints(self.ckpt_dir, keep, candidates):
                self.written_steps.remove(gone)

    def _meta(
        self, step: int, loader_state: LoaderState, optim: dict[str, Any], checksums: list[float]
    ) -> CheckpointMeta:
        cfg, start, counters = self.run, self.start, self.counters
        files = int(optim["world_size"])
        return CheckpointMeta(
            step=step,
            val_bpb=counters.last_val_bpb,
            shape=ModelShape(**self.model.config.nanochat_dict()),  # nanochat's GPTConfig takes exactly these
            # nanochat's own keys, so its tools read our checkpoints
            device_batch_size=self.batch.device_batch_size,
            max_seq_len=self.batch.seq_len,
            architecture=self.model.config.architecture,
            rope=self.model.rope,
            lineage=start.lineage,
            tag=cfg.tag,
            variant=cfg.variant,
            tokens_trained=counters.tokens_trained,
            loader_state=loader_state,
            data_start=start.data_start,
            run_config=RunConfigRecord.model_validate(cfg.model_dump(mode="json")),
            optimizer=OptimizerRecord(
                format=optim["format"],
                files=[optim_file(self.ckpt_dir, step, r).name for r in range(files)],
                sharded=files > 1,  # one file per rank, each rank's share; loads at any world size
                save_id=optim["save_id"],
                at_start=start.optimizer_note,
                imported=start.optimizer_import,
            ),
            world_size=self.dist.world_size,
            rlab_version=RLAB_VERSION,
            code_version=code_version(),
            train_state=TrainState(
                run_key=run_key(cfg),
                run_start_step=start.run_start_step,
                end_step=self.end_step,
                skipped_total=counters.skipped_total,
                run_tokens=counters.run_tokens,
                lr_policy=self.lr_policy,
                resumed_from=start.resumed_from,
                dtype=self.precision.dtype_name,
                platform=current_platform(self.dist.device),
            ),
            replica_param_checksums=checksums,  # identical when DDP kept the replicas in sync
        )
