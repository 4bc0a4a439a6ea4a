"""Which row group each rank of a `TokenLoader` reads when, and where a saved loader state resumes.

How a split is cut into work
----------------------------
The split's row groups, over all its shards, form one list of `R` row groups. Each row group
is cut into `k = ceil(world_size / R)` *parts* (document i of a row group belongs to part
`i mod k`), so there are always at least as many units of work as ranks: a shard with fewer
row groups than ranks is split finer instead of leaving a rank without data (nanochat's
loader hangs that rank). `k` is 1 whenever the split has at least `world_size` row groups.

Each epoch orders the row groups (a seeded shuffle for train; file order for val, so every
eval sees the same tokens) and lays their parts out as *slots* `0 .. R*k-1`. Rank `r` works
through slots `r, r+W, r+2W, ...`; within a slot it takes the part's documents in order. So
within an epoch no two ranks ever read the same document. (At an epoch boundary a rank that
wraps early may start the next epoch's order while others finish the current one.)

Resuming
--------
A rank's position is `(epoch, slot, doc, tok)`: the first token of the next batch is token
`tok` of document `doc` (row index in its row group) in slot `slot`. `state_dict()` returns
it (a few ints, JSON-able) for the batch most recently *returned*, not the prefetched ones.
The trainer gathers every rank's state into `{"world_size": W, "ranks": [...]}` and passes
that back as `state=`:

* same world size: each rank restarts exactly where it stopped; the batches that follow
  are exactly those an uninterrupted loader would have produced (the partly consumed
  document is re-tokenized and its first `tok` tokens skipped).
* different world size (an approximation): slots are per-rank, so there is no exact
  mapping. The new ranks start at the row group after the furthest one any old rank had
  reached, in the same epoch. Nothing is repeated; the unread rest of the row groups the
  old ranks were in the middle of is skipped (at most about W_old row groups). Logged.

A saved state carries the seed it was written under, and a resumed loader keeps that seed: the
data order belongs to the stream being continued, not to the run that continues it.

Seed replicates of a continuation (`redraw_seed`)
------------------------------------------------
A continued run starts from a copied checkpoint, so its seed alone changes nothing. With `redraw_seed` the
loader keeps the stream's position but draws the rest anew: every rank starts at the row group after the
furthest one any rank of the saved stream reached (the unread rest of the row groups they were in is skipped),
and the row groups from there on are shuffled by `redraw_seed`. Replicates so read different text, none of it
read before. The draw travels in `state_dict()`, so a resumed replicate rebuilds the same order.

Continuing after a nanochat base
--------------------------------
`after=NanochatPosition(...)` (see `rlab.nanochat.loader_position`) makes epoch 0 the row groups the base
had not read, in nanochat's file order; epochs 1, 2, ... are the usual shuffled passes. The
position travels in `state_dict()`, so a resumed continuation rebuilds the same epoch 0.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import asdict, dataclass
from typing import Any

from rlab.core.shards import Split
from rlab.errors import DataError
from rlab.nanochat.loader_position import NanochatPosition

log = logging.getLogger(__name__)

STATE_VERSION = 1


@dataclass(frozen=True)
class Redraw:
    """The stream's rest drawn anew: from row group `first` of epoch `epoch` on, the order is shuffled by `seed`."""

    epoch: int
    first: int
    seed: int


@dataclass(frozen=True)
class Position:
    """Where a rank's next batch starts: token `tok` of row `doc` of the part in `slot`."""

    epoch: int = 0
    slot: int = 0
    doc: int = 0
    tok: int = 0


class StreamOrder:
    """One rank's view of a split's slots per epoch, and the seed, start and redraw that fix their order."""

    def __init__(
        self,
        split: Split,
        row_groups: list[tuple[int, int]],
        rank: int,
        world_size: int,
        seed: int,
        after: NanochatPosition | None,
    ) -> None:
        self.split, self.row_groups = split, row_groups
        self.rank, self.world_size = rank, world_size
        self.parts = math.ceil(world_size / len(row_groups))
        self.seed = seed
        self.redraw: Redraw | None = None
        self.set_after(after)

    def set_after(self, after: NanochatPosition | None) -> None:
        self.after = after
        self.first_epoch = after.unread(self.row_groups) if after is not None else None

    def state_dict(self, position: Position) -> dict[str, Any]:
        """This rank's state at `position` (small, JSON-able)."""
        return {
            "version": STATE_VERSION,
            "split": self.split,
            "rank": self.rank,
            "world_size": self.world_size,
            "seed": self.seed,
            "parts": self.parts,
            "num_slots": self.num_slots(position.epoch),
            "after": self.after.to_dict() if self.after is not None else None,
            "redraw": asdict(self.redraw) if self.redraw is not None else None,
            **asdict(position),
        }

    # ----- the slots of an epoch -----------------------------------------------------------

    def slot_order(self, epoch: int) -> list[tuple[int, int]]:
        """Row groups in this epoch's order: shuffled by (seed, epoch) for train, file order for val;
        epoch 0 after a nanochat base: the row groups it had not read, in file order; a redraw's rest reshuffled."""
        if epoch == 0 and self.first_epoch is not None:
            order = list(self.first_epoch)
        else:
            order = list(self.row_groups)
            if self.split == "train":
                random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        draw = self.redraw
        if draw is not None and epoch >= draw.epoch:
            keep = draw.first if epoch == draw.epoch else 0
            rest = order[keep:]
            random.Random(draw.seed * 1_000_003 + epoch).shuffle(rest)
            order = order[:keep] + rest
        return order

    def num_slots(self, epoch: int) -> int:
        if epoch == 0 and self.first_epoch is not None:
            return len(self.first_epoch) * self.parts
        return len(self.row_groups) * self.parts

    def first_doc(self, slot: int) -> int:
        return slot % self.parts

    def at_row_group(self, epoch: int, row_group: int) -> Position:
        """This rank's first slot from row group `row_group` of `epoch` on (the next epoch when none is left)."""
        start = row_group * self.parts + self.rank
        if start >= self.num_slots(epoch):
            return Position(epoch + 1, self.rank, self.first_doc(self.rank))
        return Position(epoch, start, self.first_doc(start))

    # ----- resume ---------------------------------------------------------------------------

    def resume(self, state: dict[str, Any] | None, redraw_seed: int | None) -> Position:
        """This rank's start: the beginning, or where `state` left off (keeping its order), or a new draw."""
        position = self._saved_position(state)
        if redraw_seed is None:
            return position
        if self.redraw is None:
            return self._start_redraw(state, redraw_seed)
        if redraw_seed != self.redraw.seed:
            log.info("loader state was redrawn under seed %d; keeping that draw", self.redraw.seed)
        return position

    def _saved_ranks(self, state: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
        """The saved world size and every saved rank's state (one rank's own state stands for all of them)."""
        ranks = state.get("ranks")
        if ranks is None:  # one rank's own state, as returned by state_dict()
            old_world = int(state.get("world_size", 1))
            if old_world == self.world_size and int(state.get("rank", 0)) != self.rank:
                raise DataError(
                    f"Loader state of rank {state.get('rank')} given to rank {self.rank}.",
                    "Pass the gathered {'world_size': W, 'ranks': [...]} state instead.",
                )
            ranks = [state] * old_world if old_world == self.world_size else [state]
        else:
            old_world = int(state.get("world_size", len(ranks)))
            if old_world != len(ranks):
                raise DataError(
                    f"Loader state says world_size {old_world} but holds {len(ranks)} rank states."
                )
        for rs in ranks:
            if rs.get("split", self.split) != self.split:
                raise DataError(f"Loader state is for the {rs.get('split')} split, not {self.split}.")
        return old_world, ranks

    def _keep_saved_order(self, saved: dict[str, Any]) -> None:
        """A saved state keeps its own seed and start: the data order belongs to the stream being continued."""
        saved_seed = int(saved.get("seed", self.seed))
        if saved_seed != self.seed:
            log.info(
                "loader state was saved under seed %d; keeping its data order (this run's seed is %d)",
                saved_seed,
                self.seed,
            )
            self.seed = saved_seed
        saved_after = saved.get("after")
        if saved_after is not None or "after" in saved:
            restored = NanochatPosition.from_dict(saved_after) if saved_after else None
            if self.after is not None and restored != self.after:
                log.warning(
                    "loader state starts after %s, not %s; keeping the saved one",
                    restored.describe() if restored else "the beginning",
                    self.after.describe(),
                )
            self.set_after(restored)
        saved_redraw = saved.get("redraw")
        if saved_redraw:
            self.redraw = Redraw(**saved_redraw)

    def _start_redraw(self, state: dict[str, Any] | None, seed: int) -> Position:
        """Start a new draw of the stream's rest (see the module docstring) and this rank's position in it."""
        epoch, first = (0, 0) if state is None else _after_furthest(self._saved_ranks(state)[1])
        self.redraw = Redraw(epoch, first, seed)
        log.info(
            "%s split redrawn under seed %d: from row group %d of epoch %d on, in a new order",
            self.split,
            seed,
            first,
            epoch,
        )
        return self.at_row_group(epoch, first)

    def _saved_position(self, state: dict[str, Any] | None) -> Position:
        if state is None:
            epoch = 0 if self.rank < self.num_slots(0) else 1  # a first epoch with nothing left for this rank
            return Position(epoch, slot=self.rank, doc=self.first_doc(self.rank))
        old_world, ranks = self._saved_ranks(state)
        self._keep_saved_order(ranks[0])
        if old_world == self.world_size and ranks[0].get("parts", self.parts) == self.parts:
            rs = ranks[self.rank]
            pos = Position(int(rs["epoch"]), int(rs["slot"]), int(rs["doc"]), int(rs["tok"]))
            if pos.slot >= self.num_slots(pos.epoch):
                log.warning(
                    "saved loader slot %d is past this data's %d slots; starting the next epoch",
                    pos.slot,
                    self.num_slots(pos.epoch),
                )
                return Position(pos.epoch + 1, self.rank, self.first_doc(self.rank))
            return pos
        # Different world size: continue after the furthest row group any old rank reached.
        epoch, next_rg = _after_furthest(ranks)
        log.info(
            "loader resumed at a different world size (%s -> %d): %s split continues at epoch %d, row group %d "
            "of %d; the unread rest of the row groups the old ranks were in is skipped, nothing is repeated",
            old_world,
            self.world_size,
            self.split,
            epoch,
            next_rg,
            len(self.row_groups),
        )
        return self.at_row_group(epoch, next_rg)


def _after_furthest(ranks: list[dict[str, Any]]) -> tuple[int, int]:
    """(epoch, row group) just after the furthest row group any saved rank reached: the unread rest of the row
    groups they were in is skipped, so nothing is read twice."""
    old_parts = max(1, int(ranks[0].get("parts", 1)))
    epoch, slot = max((int(rs["epoch"]), int(rs["slot"])) for rs in ranks)
    return epoch, slot // old_parts + 1
