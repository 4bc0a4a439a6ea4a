"""nanochat's two BPB data loaders, re-stated from their documented semantics for the parity tests.

The fixture's `val_bpb` / `train_bpb` were measured with nanochat's own loaders (one process), so the
tests must score the same tokens. These are test code: rlab's own loaders (and its BPB) choose
documents differently on purpose (`rlab.evals.bpb.score`).

- nanochat d314e96 (`tokenizing_distributed_data_loader`): the split's documents in file/row-group
  order, each encoded with BOS prepended, concatenated into one stream and cut into consecutive
  windows of B*T+1 tokens (inputs = window[:-1], targets = window[1:], as (B, T)).
- nanochat 92d63d4 (`tokenizing_distributed_data_loader_bos_bestfit`): a buffer of >= 1000 BOS-prefixed
  documents (refilled row group by row group, cycling epochs); each row of T+1 tokens is filled by
  repeatedly taking the largest buffered document that fits whole, and when none fits, the shortest
  document cropped to the space left.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import torch


def _documents(tokenizer, data_dir: Path, split: str) -> Iterator[list[list[int]]]:
    """Row groups of the split's documents, BOS-prefixed token ids, forever (world size 1: every row
    group, in order; each row group is encoded once and reused across epochs)."""
    files = sorted(p for p in Path(data_dir).glob("*.parquet"))
    files = files[:-1] if split == "train" else files[-1:]
    encoded: dict[tuple[Path, int], list[list[int]]] = {}
    while True:
        for path in files:
            pf = pq.ParquetFile(path)
            for rg in range(pf.num_row_groups):
                if (path, rg) not in encoded:
                    texts = pf.read_row_group(rg).column("text").to_pylist()
                    encoded[(path, rg)] = tokenizer.encode(texts, prepend=tokenizer.bos_token_id)
                yield [list(ids) for ids in encoded[(path, rg)]]


def stream_batches(
    tokenizer, data_dir: Path, split: str, B: int, T: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """d314e96's loader at world size 1."""
    buffer: list[int] = []
    docs = _documents(tokenizer, data_dir, split)
    while True:
        while len(buffer) < B * T + 1:
            for ids in next(docs):
                buffer.extend(ids)
        window, buffer = buffer[: B * T + 1], buffer[B * T + 1 :]
        t = torch.tensor(window, dtype=torch.long)
        yield t[:-1].view(B, T), t[1:].view(B, T)


def resumed_documents(
    tokenizer, data_dir: Path, split: str, state: dict, rank: int, world: int
) -> Iterator[list[list[int]]]:
    """92d63d4's `_document_batches` for one rank resumed from `state` ({pq_idx, rg_idx, epoch}): in the
    resume file, the first row group is the next whole round after rg_idx (rank's share of it); then every
    file from the start, row groups rank, rank + world, ... (row groups of <= 128 documents here)."""
    files = sorted(p for p in Path(data_dir).glob("*.parquet"))
    files = files[:-1] if split == "train" else files[-1:]
    resume_pq, resume_rg, first = state["pq_idx"], state["rg_idx"], True
    while True:
        pq_idx = resume_pq if first else 0
        while pq_idx < len(files):
            pf = pq.ParquetFile(files[pq_idx])
            if first and resume_rg is not None and pq_idx == resume_pq:
                rg = (resume_rg // world + 1) * world + rank
                resume_rg = None
                if rg >= pf.num_row_groups:
                    pq_idx += 1
                    continue
            else:
                rg = rank
            while rg < pf.num_row_groups:
                texts = pf.read_row_group(rg).column("text").to_pylist()
                yield [list(ids) for ids in tokenizer.encode(texts, prepend=tokenizer.bos_token_id)]
                rg += world
            pq_idx += 1
        first = False


def bestfit_batches(
    tokenizer, data_dir: Path, split: str, B: int, T: int, buffer_size: int = 1000, docs=None
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """92d63d4's BOS-aligned best-fit loader (world size 1 from the start unless `docs` is given)."""
    docs = docs if docs is not None else _documents(tokenizer, data_dir, split)
    buffer: list[list[int]] = []
    capacity = T + 1
    while True:
        rows = torch.empty((B, capacity), dtype=torch.long)
        for r in range(B):
            pos = 0
            while pos < capacity:
                while len(buffer) < buffer_size:
                    buffer.extend(next(docs))
                remaining = capacity - pos
                best, best_len = -1, 0
                for i, doc in enumerate(buffer):
                    if best_len < len(doc) <= remaining:
                        best, best_len = i, len(doc)
                if best >= 0:
                    doc = buffer.pop(best)
                    rows[r, pos : pos + len(doc)] = torch.tensor(doc)
                    pos += len(doc)
                else:
                    shortest = min(range(len(buffer)), key=lambda i: len(buffer[i]))
                    doc = buffer.pop(shortest)
                    rows[r, pos:] = torch.tensor(doc[:remaining])
                    pos = capacity
        yield rows[:, :-1], rows[:, 1:]


@torch.no_grad()
def evaluate_bpb(model, batches, steps: int, token_bytes: torch.Tensor) -> float:
    """nanochat's `loss_eval.evaluate_bpb`: summed nats over targets with > 0 bytes / (ln 2 * bytes)."""
    total_nats = torch.tensor(0.0, dtype=torch.float32)
    total_bytes = torch.tensor(0, dtype=torch.int64)
    for _ in range(steps):
        x, y = next(batches)
        loss = model(x, y, loss_reduction="none").view(-1)
        nbytes = token_bytes[y.reshape(-1)]
        total_nats += (loss * (nbytes > 0)).sum()
        total_bytes += nbytes.sum()
    return total_nats.item() / (math.log(2) * total_bytes.item())


def relative_step_error(model, ref: Path) -> dict[str, float]:
    """Per tensor: |our step - nanochat's step| / |nanochat's step| (Frobenius norms), for a model resumed from
    `ref`'s d2 step 20 and compared with nanochat's own resumed step 21 (`ref/resumed`)."""
    w20 = torch.load(
        ref / "base_checkpoints" / "d2" / "model_000020.pt", map_location="cpu", weights_only=True
    )
    w21 = torch.load(ref / "resumed" / "model_000021.pt", map_location="cpu", weights_only=True)
    return {
        n: float((p.detach() - w21[n]).norm() / (w21[n] - w20[n]).norm()) for n, p in model.named_parameters()
    }
