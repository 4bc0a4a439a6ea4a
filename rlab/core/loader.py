"""Distributed, resumable token loader over nanochat's parquet shards.

Packing
-------
Each document is tokenized with `<|bos|>` prepended; a rank's documents form one token
stream that is cut into rows of `T+1` tokens; `B` consecutive rows make a batch, and
`inputs = rows[:, :-1]`, `targets = rows[:, 1:]`, both (B, T) int64 on the device.
A background thread reads parquet and tokenizes (tiktoken releases the GIL) into a small
prefetch queue, so tokenization overlaps with the training step.

Which row group each rank reads when (slots, epochs), and how a saved state resumes, live in
`rlab.core.loader_order`; which files form a split, in `rlab.core.shards`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.core.loader_order import Position, StreamOrder
from rlab.core.shards import Split, row_groups, split_shards
from rlab.errors import DataError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from rlab.core.tokenizer import Tokenizer
    from rlab.nanochat.loader_position import NanochatPosition

log = logging.getLogger(__name__)

# One batch-encode call takes up to this many documents / characters: big enough to keep the
# tokenizer threads busy, small enough that the first batch is ready quickly and memory stays flat.
_CHUNK_DOCS = 256
_CHUNK_CHARS = 1_000_000


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
        self.tokenizer = tokenizer
        self.bos = tokenizer.bos_token_id
        self.prefetch = max(1, prefetch)
        self.tokenizer_threads = tokenizer_threads

        self.shards = split_shards(data_dir, split)
        groups = row_groups(self.shards)
        if not groups:
            raise DataError(f"The {split} split in {data_dir} has no row groups (empty shards).")
        self.order = StreamOrder(split, groups, rank, world_size, seed, after)
        if self.order.parts > 1:
            log.info(
                "%s split has %d row groups for %d ranks: each row group is split into %d parts",
                split,
                len(groups),
                world_size,
                self.order.parts,
            )
        self._position = self.order.resume(state, redraw_seed if split == "train" else None)
        if after is not None and self.order.first_epoch is not None and state is None:
            log.info(
                "%s split starts after %s: epoch 0 is the %d of %d row groups it had not read",
                split,
                after.describe(),
                len(self.order.first_epoch),
                len(groups),
            )

        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def parts(self) -> int:
        """How many parts each row group is cut into (more than one when ranks outnumber row groups)."""
        return self.order.parts

    def state_dict(self) -> dict[str, Any]:
        """This rank's position after the last batch returned (small, JSON-able)."""
        return self.order.state_dict(self._position)

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

    def _documents(self, start: Position) -> Iterator[tuple[Position, np.ndarray, int]]:
        """Yield (position, tokens with BOS, tokens to skip) for this rank's documents, forever."""
        import numpy as np
        import pyarrow.parquet as pq

        files: dict[int, pq.ParquetFile] = {}
        epoch, slot, doc = start.epoch, start.slot, start.doc
        full_epoch, seen = slot == self.rank, False
        while True:
            order = self.order.slot_order(epoch)
            if epoch == 0 and self.order.first_epoch is not None:
                full_epoch = False  # a partial first epoch may leave a rank without documents
            while slot < self.order.num_slots(epoch):
                shard, rg = order[slot // self.order.parts]
                if shard not in files:
                    files[shard] = pq.ParquetFile(self.shards[shard])
                texts = files[shard].read_row_group(rg, columns=["text"]).column("text").to_pylist()
                for chunk in _chunks(texts, range(doc, len(texts), self.order.parts)):
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
                doc = self.order.first_doc(slot)
            if full_epoch and not seen:
                raise DataError(
                    f"Rank {self.rank} of {self.world_size} got no documents from the {self.split} split "
                    f"({len(self.order.row_groups)} row groups): too few documents for this many ranks.",
                    "Use fewer ranks or a larger corpus.",
                )
            epoch, slot, full_epoch, seen = epoch + 1, self.rank, True, False
            doc = self.order.first_doc(slot)


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
