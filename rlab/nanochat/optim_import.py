"""Rebuild a full optimizer state from nanochat's per-rank shards and load it into rlab's optimizers.

nanochat writes one file per rank, `optim_<step>_rank<r>.pt`, in a format that changed between generations.
Each generation's reader (`READERS`: `gen2025/optimizer.py`, `gen2026/optimizer.py`) returns None for a
format it does not know, else one world-size-free `FullState` (`rlab.nanochat.optim_state`), of which each
rank of the rlab run takes its own share (`rlab.core.optim_shards.load_named_state`). rlab's optimizers
(`rlab.core.optim`) run the same update rules: torch.optim.AdamW with nanochat's betas/eps (bias correction
continues from nanochat's step count) and torch.optim.Muon (same Nesterov lerp, same quintic Newton-Schulz in
bf16, same shape scaling). The LR follows the rlab run's own schedule; nanochat's schedule is a function of
its `num_iterations` and is not carried over.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlab.core.checkpoint_meta import OptimizerImport
from rlab.core.optim_shards import NamedState, StateMismatch, load_named_state
from rlab.nanochat.gen2025.optimizer import read_shards as read_2025
from rlab.nanochat.gen2026.optimizer import read_shards as read_2026
from rlab.nanochat.optim_state import FullState, ParamList, Reader, ShardMismatch
from rlab.nanochat.state_dict import strip_compile_prefix
from rlab.paths import model_file, optim_file, optim_ranks

logger = logging.getLogger(__name__)


class ImportReport(OptimizerImport):
    """What `import_nanochat_optimizer` did, for the log: the meta's `optimizer.import` record (`to_meta`) and
    the tensors it restored."""

    tensors: int = 0

    def describe(self) -> str:
        if not self.restored:
            return f"not imported: {self.reason}"
        return (
            f"restored from nanochat's {self.world_size} per-rank shard(s) ({self.format}, step "
            f"{self.nanochat_step}, {self.tensors} tensors, Muon momentum {self.muon_momentum:.4g})"
            + "".join(f"; {n}" for n in self.notes)
        )

    def to_meta(self) -> OptimizerImport:
        """The meta's `optimizer.import` record: every field of it, given (so each is written), none of ours."""
        return OptimizerImport(**{name: getattr(self, name) for name in OptimizerImport.model_fields})


READERS: list[Reader] = [read_2025, read_2026]
"""Each generation's shard reader, tried in order (each returns None for a format it does not know)."""


def load_shards(ckpt_dir: Path, step: int) -> list[Any]:
    """Every rank's shard, rank 0 first; ShardMismatch when none, a gap, or an unreadable file."""
    ckpt_dir = Path(ckpt_dir)
    found = optim_ranks(ckpt_dir, step)
    if not found:
        raise ShardMismatch(f"no optimizer shards optim_{step:06d}_rank*.pt in {ckpt_dir}")
    if found != list(range(len(found))):
        gaps = sorted(set(range(max(found) + 1)) - set(found))
        raise ShardMismatch(
            f"optimizer shard(s) of rank {', '.join(map(str, gaps))} missing "
            f"(found ranks {', '.join(map(str, found))})"
        )
    shards = []
    for r in found:
        path = optim_file(ckpt_dir, step, r)
        try:
            shards.append(torch.load(path, map_location="cpu", weights_only=True))
        except Exception as exc:  # noqa: BLE001 - truncated file, foreign pickle, ...: all mean "cannot import"
            raise ShardMismatch(f"cannot read {path.name}: {str(exc).splitlines()[0][:200]}") from None
    return shards


def checkpoint_params(ckpt_dir: Path, step: int) -> ParamList:
    """(name, shape) of the checkpoint's tensors in file order (memory-mapped: nothing is read in full)."""
    state = torch.load(model_file(Path(ckpt_dir), step), map_location="cpu", mmap=True, weights_only=True)
    return [(k, tuple(v.shape)) for k, v in strip_compile_prefix(state).items()]


def apply_full_state(full: FullState, model: nn.Module, optimizers: list[torch.optim.Optimizer]) -> int:
    """Load `full` into rlab's optimizers (AdamW: moments + step; Muon: momentum), each rank its own share
    (`rlab.core.optim_shards.load_named_state`); returns the tensors restored model-wide."""

    step = torch.tensor(float(full.step), dtype=torch.float32)
    named: NamedState = {name: [(0, {"momentum_buffer": buf})] for name, buf in full.muon.items()}
    named.update({name: [(0, {"step": step, **moments})] for name, moments in full.adam.items()})
    try:
        return load_named_state(optimizers, named, muon_momentum=full.muon_momentum)
    except StateMismatch as exc:
        raise ShardMismatch(str(exc)) from None


def import_nanochat_optimizer(
    ckpt_dir: Path, step: int, model: nn.Module, optimizers: list[torch.optim.Optimizer]
) -> ImportReport:
    """Rebuild the optimizer state of nanochat's checkpoint `step` in `ckpt_dir` into `optimizers`.

    Never raises for bad or missing shards: the report says why nothing was loaded (the optimizers
    are then untouched, i.e. fresh).
    """
    try:
        shards = load_shards(ckpt_dir, step)
        params = checkpoint_params(ckpt_dir, step)
        for reader in READERS:
            full = reader(shards, params)
            if full is not None:
                break
        else:
            raise ShardMismatch("the shards are in no optimizer format rlab knows")
        count = apply_full_state(full, model, optimizers)
    except ShardMismatch as exc:
        logger.warning("nanochat optimizer state not imported from %s step %d: %s", ckpt_dir, step, exc)
        return ImportReport(restored=False, reason=str(exc))
    report = ImportReport(
        restored=True,
        reason="imported",
        format=full.format,
        world_size=full.world_size,
        nanochat_step=full.step,
        muon_momentum=full.muon_momentum,
        tensors=count,
        notes=full.notes,
    )
    logger.info("optimizer %s", report.describe())
    return report
