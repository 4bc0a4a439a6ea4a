"""What a `--resume` changes before it launches: the global batch at another world size, and `--resume-from`.

A run resumed on another number of processes keeps its tokens per optimizer step (the global batch)
by gradient accumulation when the old batch divides into the new micro-steps; otherwise the run
goes on with the new batch and the console says so, with the settings that would keep it.
`--resume-from N` resumes a tag from its step N: the newer checkpoints (a broken newest one, say) are
moved into `<tag>/set_aside/`, never deleted, so the worker's own search for the newest step finds N.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rlab.core.checkpoint_meta import CheckpointMeta, TrainArgs, load_meta
from rlab.errors import CheckpointError
from rlab.orchestrate.clone import checkpoint_files
from rlab.paths import checkpoint_steps, meta_file
from rlab.spec.run import RunConfig

SET_ASIDE = "set_aside"


def _own_meta(run: RunConfig, ckpt_dir: Path) -> CheckpointMeta | None:
    """The newest meta this run wrote in its tag (not the clone's), or None."""
    from rlab.core.train_start import run_key  # noqa: PLC0415 - defers numpy, torch

    for step in reversed(checkpoint_steps(ckpt_dir)):
        try:
            meta = load_meta(meta_file(ckpt_dir, step))
        except (CheckpointError, OSError):
            continue
        if meta.train_state is not None and meta.train_state.run_key == run_key(run):
            return meta
    return None


def keep_global_batch(run: RunConfig, ckpt_dir: Path, world_size: int) -> tuple[RunConfig, str | None]:
    """`run` resumed at `world_size`: its batch made the one it trained with, when accumulation allows,
    and a line saying what happens to the batch (None when nothing changes)."""
    meta = _own_meta(run, ckpt_dir)
    if meta is None or meta.world_size is None or meta.world_size == world_size:
        return run, None
    old_world = meta.world_size
    train = run.train
    trained = (meta.run_config.train if meta.run_config is not None else None) or TrainArgs()
    old_total = trained.total_batch_size or (
        (trained.device_batch_size or train.device_batch_size)
        * (trained.seq_len or train.seq_len)
        * old_world
    )
    per_step = train.device_batch_size * train.seq_len * world_size
    new_total = train.total_batch_size or per_step
    where = f"{run.tag}: resumed on {world_size} process(es) per job (it trained on {old_world})"
    if new_total == old_total:
        return run, None
    if train.total_batch_size is None and old_total % per_step == 0:
        kept = run.model_copy(update={"train": train.model_copy(update={"total_batch_size": old_total})})
        return kept, (
            f"{where}: the global batch stays {old_total:,} tokens/step, by {old_total // per_step} "
            "gradient accumulation step(s)."
        )
    return run, (
        f"{where}: {new_total:,} tokens per step instead of {old_total:,}, so the rest of the run is not the one "
        f"an uninterrupted run would train. To keep {old_total:,}: --nproc {old_world}, or a train.device_batch_size "
        f"that divides it at this world size."
    )


def steps_to_set_aside(ckpt_dir: Path, resume_from: int) -> list[int]:
    """The complete steps newer than `resume_from`."""
    return [s for s in checkpoint_steps(ckpt_dir) if s > resume_from]


def set_aside(ckpt_dir: Path, steps: list[int]) -> Path:
    """Move each step's files into `<ckpt_dir>/set_aside/<time>/` (meta first: a step without its meta is no
    checkpoint, so an interrupted move never leaves a half step that looks complete); returns that folder."""

    folder = ckpt_dir / SET_ASIDE / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    for step in steps:
        files = checkpoint_files(ckpt_dir, step)
        for path in [meta_file(ckpt_dir, step), *(p for p in files if p != meta_file(ckpt_dir, step))]:
            if path.exists():
                shutil.move(str(path), str(folder / path.name))
    return folder
