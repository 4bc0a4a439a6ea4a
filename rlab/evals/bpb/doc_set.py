"""The fixed set of whole documents that train/val BPB score, chosen before any rank or batch exists.

Pools (nanochat's layout: the last shard is val, the others train):
- **val**: every document of the val shard (the last `base_data/shard_*.parquet`).
- **train**: every document of the *first* train shard (`shard_00000.parquet`), the shard a base model
  (nanochat's or rlab's) reads first: train BPB is measured on text the base was trained on. (nanochat's
  `base_loss` also reads shard 0 from its start; rlab draws a seeded sample of the same shard.)

Selection: the pool's non-empty documents are put in a seeded order (`random.Random(f"{seed}:{split}")`)
and taken whole, in that order, until their targets reach the token budget (the last one taken whole, so
the budget may be exceeded by less than one document). When the budget exceeds the pool, every document
is taken once and `whole_split` says so: no token is ever scored twice. The selection depends only on
the data, the tokenizer, the seed and the budget, never on world size, batch size or packing. Each
document is recorded by id (`<shard stem>:<row>`) and the sha256 of its text, and `data_hash` hashes
that list: two evals with equal hashes scored the same text.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rlab.core.shards import split_shards
from rlab.errors import DataError
from rlab.records.base import short_hash

if TYPE_CHECKING:
    from rlab.core.tokenizer import Tokenizer

_ENCODE_CHUNK = 64  # documents per batch-encode call


@dataclass(frozen=True)
class Document:
    id: str
    """`<shard stem>:<row>`."""
    sha256: str
    """Of the UTF-8 text, 16 hex."""
    tokens: list[int]
    """The document's tokens with `<|bos|>` prepended (nanochat's convention); targets are tokens[1:]."""


@dataclass(frozen=True)
class DocSet:
    split: str
    docs: list[Document]
    pool_docs: int
    """Non-empty documents in the split's pool."""
    token_budget: int
    whole_split: bool
    shards: list[str]

    @property
    def targets(self) -> int:
        return sum(len(d.tokens) - 1 for d in self.docs)

    @property
    def data_hash(self) -> str:
        return short_hash([[d.id, d.sha256] for d in self.docs])


def pool_shards(data_dir: Path, split: str) -> list[Path]:
    """The shards a split's documents are drawn from (see the module docstring)."""

    shards = split_shards(data_dir, split)  # type: ignore[arg-type]
    return shards if split == "val" else shards[:1]


def _read_texts(shards: list[Path]) -> list[tuple[str, str]]:
    """(id, text) of every non-empty document in the shards, in file order."""
    import pyarrow.parquet as pq

    out: list[tuple[str, str]] = []
    for path in shards:
        try:
            texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
        except (OSError, ValueError, KeyError) as exc:
            raise DataError(f"Cannot read the 'text' column of {path}: {exc}") from exc
        out.extend((f"{path.stem}:{row}", t) for row, t in enumerate(texts) if t)
    return out


def select_documents(
    data_dir: Path, tokenizer: Tokenizer, split: str, token_budget: int, seed: int
) -> DocSet:
    """The documents `split` BPB scores: a seeded order of the pool, taken whole until the budget."""
    shards = pool_shards(Path(data_dir), split)
    pool = _read_texts(shards)
    if not pool:
        raise DataError(
            f"The {split} split ({', '.join(p.name for p in shards)}) has no non-empty documents.",
            "Rebuild the data with `rlab data prepare --force`.",
        )
    order = list(range(len(pool)))
    random.Random(f"{seed}:{split}").shuffle(order)
    docs: list[Document] = []
    targets = 0
    for start in range(0, len(order), _ENCODE_CHUNK):
        chunk = [pool[i] for i in order[start : start + _ENCODE_CHUNK]]
        encoded = tokenizer.encode([text for _, text in chunk], prepend=tokenizer.bos_token_id)
        for (doc_id, text), ids in zip(chunk, encoded, strict=True):
            if len(ids) < 2:
                continue
            docs.append(Document(doc_id, hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], list(ids)))
            targets += len(ids) - 1
            if targets >= token_budget:
                return DocSet(split, docs, len(pool), token_budget, False, [p.name for p in shards])
    return DocSet(split, docs, len(pool), token_budget, True, [p.name for p in shards])
