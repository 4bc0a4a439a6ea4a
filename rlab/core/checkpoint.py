"""Checkpoint files in nanochat's layout, written atomically, read back with their RoPE config.

One checkpoint at step S of a tag is three files in `<base>/base_checkpoints/<tag>/`:
`model_{S:06d}.pt` (state dict, nanochat's keys), `optim_{S:06d}_rank0.pt` (rlab writes one
world-size-independent optimizer file; nanochat wrote one shard per rank) and
`meta_{S:06d}.json` (nanochat's keys plus rlab's: rope, lineage, loader state, run config, ...).

Every file is written to a hidden temp name, fsynced and renamed into place, and the meta is
written *last*: a checkpoint is complete if and only if its meta file exists. A crash mid-save
therefore leaves either the previous checkpoint set or temp files that nothing ever reads
(`list_steps` only reports steps whose meta and model both exist).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from rlab.atomic_io import atomic_write
from rlab.errors import CheckpointError, TrainingError
from rlab.paths import checkpoint_steps as list_steps
from rlab.paths import meta_file, model_file, optim_file

logger = logging.getLogger(__name__)



def find_last_step(ckpt_dir: Path) -> int | None:
    """Newest complete checkpoint step, or None when there is none."""
    steps = list_steps(ckpt_dir)
    return steps[-1] if steps else None


def read_meta(ckpt_dir: Path, step: int) -> dict[str, Any]:
    """The meta JSON of one checkpoint; a `CheckpointError` listing the steps that do exist."""
    path = meta_file(Path(ckpt_dir), step)
    if not path.exists() or not model_file(Path(ckpt_dir), step).exists():
        found = list_steps(ckpt_dir)
        listing = ", ".join(str(s) for s in found) if found else "none"
        raise CheckpointError(
            f"No complete checkpoint for step {step} in {ckpt_dir} (found: {listing}).",
            hint="Choose one of the listed steps." if found else "Check the base dir and tag.",
        )
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: unreadable meta JSON ({exc}).") from None




def nonfinite_tensors(state: dict[str, Any]) -> list[str]:
    """Names of floating-point tensors in `state` holding NaN or Inf."""
    import torch

    bad = []
    for name, value in state.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not torch.isfinite(value).all():
            bad.append(name)
    return bad


def save_checkpoint(
    ckpt_dir: Path,
    step: int,
    model_state: dict[str, Any],
    meta: dict[str, Any],
    optim_state: dict[str, Any] | None = None,
) -> None:
    """Write model, optimizer (one file, rank 0's name) and finally meta for `step`.

    Refuses (TrainingError) to write parameters that are not finite.
    """
    import torch

    ckpt_dir = Path(ckpt_dir)
    bad = nonfinite_tensors(model_state)
    if bad:
        raise TrainingError(
            f"Refusing to save step {step} of {ckpt_dir.name}: non-finite values in {', '.join(bad[:5])}"
            + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            + ".",
            hint="The previous checkpoint is untouched; lower the LR or enable grad clipping and resume.",
        )
    # Remove a stale meta first: until the new meta lands, this step must not look complete.
    meta_file(ckpt_dir, step).unlink(missing_ok=True)
    atomic_write(model_file(ckpt_dir, step), lambda fh: torch.save(model_state, fh))
    if optim_state is not None:
        atomic_write(optim_file(ckpt_dir, step, 0), lambda fh: torch.save(optim_state, fh))
    text = json.dumps(meta, indent=2, default=str) + "\n"
    atomic_write(meta_file(ckpt_dir, step), lambda fh: fh.write(text), binary=False)
    logger.info("saved checkpoint %s step %d", ckpt_dir, step)


def delete_checkpoint(ckpt_dir: Path, step: int) -> None:
    """Remove one checkpoint, meta first so it never looks complete half-deleted."""
    ckpt_dir = Path(ckpt_dir)
    meta_file(ckpt_dir, step).unlink(missing_ok=True)
    model_file(ckpt_dir, step).unlink(missing_ok=True)
    for shard in ckpt_dir.glob(f"optim_{step:06d}_rank*.pt"):
        shard.unlink(missing_ok=True)


def prune_checkpoints(ckpt_dir: Path, keep_last: int, candidates: list[int]) -> list[int]:
    """Delete all but the newest `keep_last` of `candidates` (steps this run wrote); returns deleted steps."""
    doomed = sorted(candidates)[:-keep_last] if keep_last > 0 else sorted(candidates)
    for step in doomed:
        delete_checkpoint(ckpt_dir, step)
    if doomed:
        logger.info("keep_last=%d: deleted steps %s from %s", keep_last, doomed, ckpt_dir)
    return doomed


def load_optim_payload(ckpt_dir: Path, step: int) -> Any | None:
    """The rank-0 optimizer file's content, or None when absent."""
    import torch

    path = optim_file(Path(ckpt_dir), step, 0)
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=False)


def rope_from_meta(meta: dict[str, Any]):
    """The checkpoint's RoPE config; a nanochat meta without one is plain rope at its sequence_len."""
    from rlab.spec.rope import RopeSpec

    seq_len = int(meta["model_config"]["sequence_len"])
    spec = RopeSpec.model_validate(meta["rope"]) if meta.get("rope") else RopeSpec()
    return spec.with_original_len(seq_len)


def load_state_dict_file(ckpt_dir: Path, step: int, device: Any = "cpu") -> dict[str, Any]:
    """The raw model state dict of one checkpoint."""
    import torch

    path = model_file(Path(ckpt_dir), step)
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"Model file missing: {path}") from None


def load_model(ckpt_dir: Path, step: int | None = None, device: Any = "cpu", rope=None):
    """(GPT, meta) for `step` (None = newest complete); `rope` overrides the checkpoint's RoPE config."""
    from rlab.core.gpt import GPT, GPTConfig

    ckpt_dir = Path(ckpt_dir)
    if step is None:
        step = find_last_step(ckpt_dir)
        if step is None:
            raise CheckpointError(f"No complete checkpoint in {ckpt_dir}.", hint="Check the base dir and --tag.")
    meta = read_meta(ckpt_dir, step)
    config = GPTConfig.from_dict(meta["model_config"])
    spec = rope if rope is not None else rope_from_meta(meta)
    model = GPT(config, rope=spec.with_original_len(config.sequence_len)).to(device)
    model.load_nanochat_state_dict(load_state_dict_file(ckpt_dir, step, device))
    return model, meta
