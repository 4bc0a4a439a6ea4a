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
from typing import Any

from rlab import __version__
from rlab.core.checkpoint_meta import (
    CheckpointMeta,
    LoaderState,
    ModelShape,
    OptimizerRecord,
    RunConfigRecord,
    TrainState,
)
from rlab.core.train_start import run_key
from rlab.core.trainer_state import TrainerState
from rlab.errors import TrainingError
from rlab.paths import optim_file
from rlab.provenance import code_version, current_platform

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)

RLAB_VERSION = __version__


def rng_state(device: Any) -> dict[str, Any]:
    """torch's, Python's and (on a GPU) CUDA's generator states, saved with each rank's optimizer file."""
    import torch

    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any] | None, device: Any) -> None:
    """Put back what `rng_state` saved (nothing when the checkpoint has none)."""
    import torch

    if not state:
        return
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


class CheckpointSaving(TrainerState):
    """Saving, as a part of `rlab.core.trainer.Trainer`."""

    def save(self, step: int) -> None:
        """All ranks: gather loader state, check finiteness, write their optimizer file; rank 0 the rest."""
        import uuid

        import torch

        from rlab.core.checkpoint import (
            begin_checkpoint,
            prune_checkpoints,
            save_checkpoint,
            unhealthy_tensors,
            write_optim_file,
        )
        from rlab.core.distributed import all_gather_scalar, barrier, broadcast_object, gather_objects
        from rlab.core.optim_shards import optimizer_shard, writes_file

        loader_state = LoaderState(
            world_size=self.info.world_size, ranks=gather_objects(self.loader.state_dict(), self.info)
        )
        model_state = self.model.state_dict()
        bad = unhealthy_tensors(model_state)  # replicas are identical, so every rank decides alike
        checksums = all_gather_scalar(
            torch.stack([p.detach().double().sum() for p in self.model.parameters()]).sum(), self.info
        )
        if not bad and not all(math.isfinite(c) for c in checksums):
            bad = [f"parameter checksums {checksums}"]
        if bad:  # only healthy checkpoints: a resume must never start from exploded weights
            raise TrainingError(
                f"Refusing to save step {step} of {self.cfg.tag}: unhealthy weights ({', '.join(bad[:5])}).",
                hint="Nothing of this step was written. Lower train.lr or set train.grad_clip, then "
                + self.resume_hint(),
            )
        if len(set(checksums)) > 1:
            logger.error("replicas diverged at step %d: parameter checksums %s", step, checksums)
        payload = optimizer_shard(self.optimizers, self.info.rank)
        payload["save_id"] = broadcast_object(uuid.uuid4().hex, self.info)  # ties the ranks' files together
        payload["rng"] = rng_state(self.device)
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
                platform=current_platform(self.device),
            ),
            replica_param_checksums=checksums,  # identical when DDP kept the replicas in sync
        )
