"""Where a continuation starts reading train data: after what a nanochat base checkpoint had read.

nanochat (d314e96 and later) records rank 0's loader position in its meta as
`dataloader_state_dict = {pq_idx, rg_idx[, epoch]}`: the train shard and row group rank 0 was
reading when it saved. Its ranks read row groups `rank, rank+W, rank+2W, ...` of each train shard
in file order, and its own resume skips ahead to the next whole *round*: row group
`(rg_idx // W + 1) * W` of shard `pq_idx`, then every later shard.

rlab maps that onto its loader (`rlab.core.loader.TokenLoader(after=...)`) with the same rule: the
continuation's first epoch is every row group from that round on, in nanochat's file order; later
epochs are rlab's usual shuffled passes over all row groups. Like nanochat's own resume this is
approximate in one direction only: the unread rest of the round the base was in is skipped, and
nothing the base read is read again (in that pass; `epoch > 1` means the base had already been
through all data `epoch - 1` times).

`W` is the base's world size. nanochat does not write it into the meta; it is the number of
per-rank optimizer shards beside the checkpoint, or else bounded by the batch arithmetic in the
meta (`total_batch_size / (device_batch_size * max_seq_len) = W x grad_accum`, a multiple of W,
so rounding up to it never lands inside a round the base read). With neither, the rest of shard
`pq_idx` is skipped.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.paths import optim_file

if TYPE_CHECKING:
    from rlab.core.checkpoint_meta import CheckpointMeta

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NanochatPosition:
    """nanochat's recorded loader position, with the world size (or a multiple of it) it was read under."""

    pq_idx: int
    rg_idx: int
    world_size: int | None = None
    """Ranks of the base run, or a multiple of it; None = unknown (skip the rest of shard `pq_idx`)."""
    epoch: int = 1
    """nanochat's pass counter (starts at 1; d314e96 does not record it)."""

    def first_unread(self, num_row_groups: int) -> int:
        """First row group of shard `pq_idx` the base had not read (may be past the shard's end)."""
        if self.world_size is None:
            return num_row_groups
        w = self.world_size
        return (self.rg_idx // w + 1) * w

    def unread(self, row_groups: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The (shard, row group) pairs of `row_groups` from the next round on, in file order."""
        per_shard: dict[int, int] = {}
        for shard, _ in row_groups:
            per_shard[shard] = per_shard.get(shard, 0) + 1
        first = self.first_unread(per_shard.get(self.pq_idx, 0))
        return [
            (s, rg) for s, rg in sorted(row_groups) if s > self.pq_idx or (s == self.pq_idx and rg >= first)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {"source": "nanochat", **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NanochatPosition:
        ws = d.get("world_size")
        return cls(int(d["pq_idx"]), int(d["rg_idx"]), int(ws) if ws else None, int(d.get("epoch") or 1))

    def describe(self) -> str:
        w = f"{self.world_size} ranks" if self.world_size else "world size unknown"
        return f"nanochat shard {self.pq_idx}, row group {self.rg_idx} ({w}, pass {self.epoch})"


def nanochat_world_size(ckpt_dir: Path, step: int, meta: CheckpointMeta | None) -> tuple[int | None, str]:
    """The base run's world size (or a multiple of it) and how it was found; (None, why) when unknown."""

    shards = 0
    while optim_file(Path(ckpt_dir), step, shards).exists():
        shards += 1
    if shards:
        return shards, f"{shards} optimizer shard(s) beside the checkpoint"
    if meta is None:
        return None, "no optimizer shards and no batch arithmetic in the meta"
    user = meta.user_config
    batch = meta.device_batch_size or (user.device_batch_size if user is not None else None)
    seq_len = meta.max_seq_len or (user.max_seq_len if user is not None else None)
    if batch is None or seq_len is None:
        return None, "no optimizer shards and no batch arithmetic in the meta"
    total = (user.total_batch_size if user is not None else None) or 0
    per_rank = batch * seq_len
    if total > 0 and per_rank > 0 and total % per_rank == 0:
        return total // per_rank, "batch arithmetic in the meta (world size x grad accumulation, a bound)"
    return None, "no optimizer shards and no usable batch arithmetic in the meta"


def nanochat_position(ckpt_dir: Path, step: int, meta: CheckpointMeta) -> NanochatPosition | None:
    """The position recorded in a nanochat meta (None when it records none), with its world size."""
    state = meta.dataloader_state_dict
    if state is None or state.pq_idx is None or state.rg_idx is None:
        return None
    world, how = nanochat_world_size(ckpt_dir, step, meta)
    log.info(
        "nanochat loader position pq_idx=%s rg_idx=%s; world size %s from %s",
        state.pq_idx,
        state.rg_idx,
        world,
        how,
    )
    return NanochatPosition(state.pq_idx, state.rg_idx, world, state.epoch or 1)
