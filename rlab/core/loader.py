"""Distributed, resumable token loader over nanochat's parquet shards.

Data layout (nanochat's): `<data_dir>/shard_00000.parquet, ...`, each with a `text` column
and a few row groups; the **last** shard is the validation split, all others are train.

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

Packing
-------
Each document is tokenized with `<|bos|>` prepended; a rank's documents form one token
stream that is cut into rows of `T+1` tokens; `B` consecutive rows make a batch, and
`inputs = rows[:, :-1]`, `targets = rows[:, 1:]`, both (B, T) int64 on the device.
A background thread reads parquet and tokenizes (tiktoken releases the GIL) into a small
prefetch queue, so tokenization overlaps with the training step.

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
import queue
import random
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rlab.errors import DataError
from rlab.nanochat.loader_position import NanochatPosition

if TYPE_CHECKING:
    import numpy as np
    import torch

    from rlab.core.tokenizer import Tokenizer
    from rlab.nanochat.loader_position import NanochatPosition

log = logging.getLogger(__name__)

Split = Literal["train", "val"]
STATE_VERSION = 1
# One batch-encode call takes up to this many documents / characters: big enough to keep the
# tokenizer threads busy, small enough that the first batch is ready quickly and memory stays flat.
_CHUNK_DOCS = 256
_CHUNK_CHARS = 1_000_000


@dataclass(frozen=True)
class Redraw:
    """The stream's rest drawn anew: from row group `first` of epoch `epoch` on, the order is shuffled by `seed`."""

    epoch: int
    first: int
    seed: int


def list_shards(data_dir: str | Path) -> list[Path]:
    """The parquet shards of a base_data dir, in order (the last one is val)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"No data directory at {data_dir}.", "Build it with `rlab data prepare`.")
    shards = sorted(p for p in data_dir.iterdir() if p.suffix == ".parquet" and p.is_file())
    if not shards:
        raise DataError(f"No .parquet shards in {data_dir}.", "Build them with `rlab data prepare`.")
    return shards


def split_shards(data_dir: str | Path, split: Split) -> list[Path]:
    """nanochat's rule: the last shard is val, every other shard is train."""
    shards = list_shards(data_dir)
    if split not in ("train", "val"):
        raise DataError(f"Unknown split {split!r}; use 'train' or 'val'.")
    if len(shards) < 2:
        raise DataError(
            f"{data_dir} has {len(shards)} shard; need at least 2 (the last one is the val split).",
            "Rebuild with `rlab data prepare --force`.",
        )
    return shards[-1:] if split == "val" else shards[:-1]


def check_shards(data_dir: str | Path) -> int:
    """Open every shard's footer (both splits) as the loader will; the number of row groups, or a `DataError`
    naming the shard that cannot be read."""
    return len(_row_groups(split_shards(data_dir, "train"))) + len(_row_groups(split_shards(data_dir, "val")))


def _row_groups(shards: list[Path]) -> list[tuple[int, int]]:
    """(shard index, row group index) of every row group, checking each shard has `text`."""
    import pyarrow.parquet as pq

    out: list[tuple[int, int]] = []
    for i, path in enumerate(shards):
        try:
            meta = pq.ParquetFile(path)
        except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) on garbage
            raise DataError(f"Cannot read parquet shard {path}: {exc}") from exc
        if "text" not in meta.schema_arrow.names:
            raise DataError(
                f"Shard {path} has no 'text' column (columns: {', '.join(meta.schema_arrow.names)}).",
                "rlab reads nanochat's layout: one document per row in a string column named 'text'.",
            )
        out.extend((i, rg) for rg in range(meta.num_row_groups))
    return out


@dataclass(frozen=True)
class Position:
    """Where a rank's next batch starts: token `tok` of row `doc` of the part in `slot`."""

    epoch: int = 0
    slot: int = 0
    doc: int = 0
    tok: int = 0


class TokenLoader:
    """Iterates `(inputs, targets)`, (B, T) int64 on `device`; see the module docstring."""

    def __init__(
        self,
        data_dir: str | Path,
        tokenizer: Tokenizer,
        split: Split,
        batch_size: int,
        seq_len: int,
        rank: int = 0,
        world_size: int = 1,
        device: str | torch.device = "cpu",
        seed: int = 0,
        state: dict[str, Any] | None = None,
        prefetch: int = 4,
        tokenizer_threads: int = 4,
        after: NanochatPosition | None = None,
        redraw_seed: int | None = None,
    ) -> None:
        import torch

        if batch_size < 1 or seq_len < 1:
            raise DataError(f"batch_size and seq_len must be positive, got {batch_size} and {seq_len}.")
        if not 0 <= rank < world_size:
            raise DataError(f"rank {rank} is outside world size {world_size}.")
        self.split: Split = split
        self.batch_size, self.seq_len = batch_size, seq_len
        self.rank, self.world_size = rank, world_size
        self.device = torch.device(device)
        self.seed = seed
        self.tokenizer = tokenizer
        self.bos = tokenizer.bos_token_id
        self.prefetch = max(1, prefetch)
        self.tokenizer_threads = tokenizer_threads

        self.shards = split_shards(data_dir, split)
        self.row_groups = _row_groups(self.shards)
        if not self.row_groups:
            raise DataError(f"The {split} split in {data_dir} has no row groups (empty shards).")
        self.parts = math.ceil(world_size / len(self.row_groups))
        self.after = after
        self._redraw_seed = redraw_seed if split == "train" else None
        self._redraw: Redraw | None = None
        if self.parts > 1:
            log.info(
                "%s split has %d row groups for %d ranks: each row group is split into %d parts",
                split,
                len(self.row_groups),
                world_size,
                self.parts,
            )
        self._position = self._resume_position(state)
        if self.after is not None and self._first_epoch is not None and state is None:
            log.info(
                "%s split starts after %s: epoch 0 is the %d of %d row groups it had not read",
                split,
                self.after.describe(),
                len(self._first_epoch),
                len(self.row_groups),
            )

        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ----- resume --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """This rank's position after the last batch returned (small, JSON-able)."""
        return {
            "version": STATE_VERSION,
            "split": self.split,
            "rank": self.rank,
            "world_size": self.world_size,
            "seed": self.seed,
            "parts": self.parts,
            "num_slots": self._num_slots(self._position.epoch),
            "after": self.after.to_dict() if self.after is not None else None,
            "redraw": asdict(self._redraw) if self._redraw is not None else None,
            **asdict(self._position),
        }

    def _set_after(self, after: NanochatPosition | None) -> None:
        self.after = after
        self._first_epoch = after.unread(self.row_groups) if after is not None else None

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
            self._set_after(restored)
        saved_redraw = saved.get("redraw")
        if saved_redraw:
            self._redraw = Redraw(**saved_redraw)
            if self._redraw_seed not in (None, self._redraw.seed):
                log.info("loader state was redrawn under seed %d; keeping that draw", self._redraw.seed)

    def _resume_position(self, state: dict[str, Any] | None) -> Position:
        self._set_after(self.after)
        position = self._saved_position(state)
        if self._redraw_seed is None or self._redraw is not None:
            return position
        return self._start_redraw(state, self._redraw_seed)

    def _start_redraw(self, state: dict[str, Any] | None, seed: int) -> Position:
        """Start a new draw of the stream's rest (see the module docstring) and this rank's position in it."""
        epoch, first = (0, 0) if state is None else _after_furthest(self._saved_ranks(state)[1])
        self._redraw = Redraw(epoch, first, seed)
        log.info(
            "%s split redrawn under seed %d: from row group %d of epoch %d on, in a new order",
            self.split,
            seed,
            first,
            epoch,
        )
        return self._at_row_group(epoch, first)

    def _saved_position(self, state: dict[str, Any] | None) -> Position:
        if state is None:
            epoch = (
                0 if self.rank < self._num_slots(0) else 1
            )  # a first epoch with nothing left for this rank
            return Position(epoch, slot=self.rank, doc=self._first_doc(self.rank))
        old_world, ranks = self._saved_ranks(state)
        self._keep_saved_order(ranks[0])
        if old_world == self.world_size and ranks[0].get("parts", self.parts) == self.parts:
            rs = ranks[self.rank]
            pos = Position(int(rs["epoch"]), int(rs["slot"]), int(rs["doc"]), int(rs["tok"]))
            if pos.slot >= self._num_slots(pos.epoch):
                log.warning(
                    "saved loader slot %d is past this data's %d slots; starting the next epoch",
                    pos.slot,
                    self._num_slots(pos.epoch),
                )
                return Position(pos.epoch + 1, self.rank, self._first_doc(self.rank))
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
        return self._at_row_group(epoch, next_rg)

    def _at_row_group(self, epoch: int, row_group: int) -> Position:
        """This rank's first slot from row group `row_group` of `epoch` on (the next epoch when none is left)."""
        start = row_group * self.parts + self.rank
        if start >= self._num_slots(epoch):
            return Position(epoch + 1, self.rank, self._first_doc(self.rank))
        return Position(epoch, start, self._first_doc(start))

    def _first_doc(self, slot: int) -> int:
        return slot % self.parts

    # ----- iteration -----------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._thread is None:
            self._start()
        assert self._queue is not None
        item = self._queue.get()
        if isinstance(item, BaseException):
            self.close()
            raise item
        inputs, targets, position = item
        self._position = position
        if self.device.type != "cpu":
            inputs = inputs.to(self.device, non_blocking=True)
            targets = targets.to(self.device, non_blocking=True)
        return inputs, targets

    def _start(self) -> None:
        self._queue = queue.Queue(maxsize=self.prefetch)
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._produce,
            args=(self._position,),
            daemon=True,
            name=f"TokenLoader-{self.split}-rank{self.rank}",
        )
        self._thread.start()

    def close(self) -> None:
        """Stop the background thread (idempotent). Iterating again restarts from the current position."""
        self._stop.set()
        if self._thread is not None:
            while self._thread.is_alive():
                try:  # unblock a producer waiting on a full queue
                    assert self._queue is not None
                    self._queue.get_nowait()
                except queue.Empty:
                    pass
                self._thread.join(timeout=0.05)
        self._thread, self._queue = None, None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to clean
            pass

    def _put(self, item: Any) -> bool:
        assert self._queue is not None
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    # ----- producer (background thread) ----------------------------------------------------

    def _produce(self, start: Position) -> None:
        try:
            self._pack(start)
        except BaseException as exc:  # surfaces in the consumer's __next__
            self._put(exc)

    def _pack(self, start: Position) -> None:
        import numpy as np
        import torch

        row = self.seq_len + 1
        need = self.batch_size * row
        pin = self.device.type == "cuda"
        docs = self._documents(start)
        cur: np.ndarray | None = None
        cur_pos, off = start, 0
        while not self._stop.is_set():
            buf = np.empty(need, dtype=np.int64)
            filled = 0
            while filled < need:
                if cur is None or off >= len(cur):
                    cur_pos, cur, off = next(docs)
                take = min(need - filled, len(cur) - off)
                buf[filled : filled + take] = cur[off : off + take]
                filled += take
                off += take
            rows = torch.from_numpy(buf).view(self.batch_size, row)  # (B, T+1)
            inputs, targets = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()  # (B, T) each
            if pin:
                inputs, targets = inputs.pin_memory(), targets.pin_memory()
            after = Position(cur_pos.epoch, cur_pos.slot, cur_pos.doc, off)
            if not self._put((inputs, targets, after)):
                return

    def document_tokens(self) -> Iterator[np.ndarray]:
        """This rank's documents from its current position as token arrays (BOS first), without packing:
        lets a check pack them another way (e.g. nanochat's B*T+1 windows) from the same data position."""
        for _pos, ids, skip in self._documents(self._position):
            yield ids[skip:]

    def _slot_order(self, epoch: int) -> list[tuple[int, int]]:
        """Row groups in this epoch's order: shuffled by (seed, epoch) for train, file order for val;
        epoch 0 after a nanochat base: the row groups it had not read, in file order; a redraw's rest reshuffled."""
        if epoch == 0 and self._first_epoch is not None:
            order = list(self._first_epoch)
        else:
            order = list(self.row_groups)
            if self.split == "train":
                random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        draw = self._redraw
        if draw is not None and epoch >= draw.epoch:
            keep = draw.first if epoch == draw.epoch else 0
            rest = order[keep:]
            random.Random(draw.seed * 1_000_003 + epoch).shuffle(rest)
            order = order[:keep] + rest
        return order

    def _num_slots(self, epoch: int) -> int:
        if epoch == 0 and self._first_epoch is not None:
            return len(self._first_epoch) * self.parts
        return len(self.row_groups) * self.parts

    def _documents(self, start: Position) -> Iterator[tuple[Position, np.ndarray, int]]:
        """Yield (position, tokens with BOS, tokens to skip) for this rank's documents, forever."""
        import numpy as np
        import pyarrow.parquet as pq

        files: dict[int, pq.ParquetFile] = {}
        epoch, slot, doc = start.epoch, start.slot, start.doc
        full_epoch, seen = slot == self.rank, False
        while True:
            order = self._slot_order(epoch)
            if epoch == 0 and self._first_epoch is not None:
                full_epoch = False  # a partial first epoch may leave a rank without documents
            while slot < self._num_slots(epoch):
                shard, rg = order[slot // self.parts]
                if shard not in files:
                    files[shard] = pq.ParquetFile(self.shards[shard])
                texts = files[shard].read_row_group(rg, columns=["text"]).column("text").to_pylist()
                for chunk in _chunks(texts, range(doc, len(texts), self.parts)):
                    encoded = self.tokenizer.encode(
                        [texts[j] or "" for j in chunk], prepend=self.bos, num_threads=self.tokenizer_threads
                    )
                    for j, ids in zip(chunk, encoded):
                        pos = Position(epoch, slot, j, 0)
                        skip = start.tok if (epoch, slot, j) == (start.epoch, start.slot, start.doc) else 0
                        seen = True
                        yield pos, np.asarray(ids, dtype=np.int64), skip
                    if self._stop.is_set():
                        return
                slot += self.world_size
                doc = self._first_doc(slot)
            if full_epoch and not seen:
                raise DataError(
                    f"Rank {self.rank} of {self.world_size} got no documents from the {self.split} split "
                    f"({len(self.row_groups)} row groups): too few documents for this many ranks.",
                    "Use fewer ranks or a larger corpus.",
                )
            epoch, slot, full_epoch, seen = epoch + 1, self.rank, True, False
            doc = self._first_doc(slot)


def _after_furthest(ranks: list[dict[str, Any]]) -> tuple[int, int]:
    """(epoch, row group) just after the furthest row group any saved rank reached: the unread rest of the row
    groups they were in is skipped, so nothing is read twice."""
    old_parts = max(1, int(ranks[0].get("parts", 1)))
    epoch, slot = max((int(rs["epoch"]), int(rs["slot"])) for rs in ranks)
    return epoch, slot // old_parts + 1


def _chunks(texts: list[str | None], rows: range) -> Iterator[list[int]]:
    """Group row indices into batch-encode calls of at most _CHUNK_DOCS docs / ~_CHUNK_CHARS characters."""
    chunk: list[int] = []
    chars = 0
    for j in rows:
        chunk.append(j)
        chars += len(texts[j] or "")
        if len(chunk) >= _CHUNK_DOCS or chars >= _CHUNK_CHARS:
            yield chunk
            chunk, chars = [], 0
    if chunk:
        yield chunk
