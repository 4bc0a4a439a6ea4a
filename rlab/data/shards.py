"""Writing parquet shards in nanochat's layout.

`<base>/base_data/shard_00000.parquet ...`: one document per row in a `text` column, zstd
compressed, a few row groups per shard (the loader's unit of work is a row group, so several
per shard let several ranks share one shard). The train shards come first and the val
split is always the single last shard, which is how nanochat tells them apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

SHARD_CHARS = 4_000_000  # ~1M tokens per shard at ~4 chars/token: a handful of shards for the demo
ROW_GROUPS_PER_SHARD = 4


def shard_name(index: int) -> str:
    return f"shard_{index:05d}.parquet"


def write_parquet_texts(
    texts: Sequence[str],
    path: Path,
    row_groups: int = ROW_GROUPS_PER_SHARD,
    extra: dict[str, list] | None = None,
) -> None:
    """Write `texts` as a `text` column in about `row_groups` row groups (atomic: temp + rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {"text": pa.array(list(texts), type=pa.string())}
    for name, values in (extra or {}).items():
        columns[name] = pa.array(values)
    table = pa.table(columns)
    rows_per_group = max(1, math.ceil(len(texts) / max(1, row_groups)))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, row_group_size=rows_per_group, compression="zstd")
    tmp.replace(path)


def plan_shards(lengths: Sequence[int], shard_chars: int = SHARD_CHARS) -> list[range]:
    """Cut documents (in order) into consecutive shards of about `shard_chars` characters each.

    Never an empty shard; at least one shard when there is at least one document.
    """
    if not lengths:
        return []
    total = sum(lengths)
    n = max(1, min(len(lengths), round(total / shard_chars)))
    bounds: list[range] = []
    start, acc = 0, 0
    for i, length in enumerate(lengths):
        acc += length
        remaining_docs, remaining_shards = len(lengths) - (i + 1), n - len(bounds) - 1
        if remaining_shards > 0 and (
            acc >= total * (len(bounds) + 1) / n or remaining_docs == remaining_shards
        ):
            bounds.append(range(start, i + 1))
            start = i + 1
    bounds.append(range(start, len(lengths)))
    return bounds


def write_shards(
    train: Sequence[str],
    val: Sequence[str],
    data_dir: Path,
    shard_chars: int = SHARD_CHARS,
    row_groups: int = ROW_GROUPS_PER_SHARD,
) -> list[Path]:
    """Train shards then the val shard (last) into `data_dir`; returns their paths in order."""
    paths = []
    for i, rows in enumerate(plan_shards([len(t) for t in train], shard_chars)):
        path = data_dir / shard_name(i)
        write_parquet_texts([train[j] for j in rows], path, row_groups)
        paths.append(path)
    val_path = data_dir / shard_name(len(paths))
    write_parquet_texts(list(val), val_path, row_groups)
    paths.append(val_path)
    return paths
