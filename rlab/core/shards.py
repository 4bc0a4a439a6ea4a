"""nanochat's parquet shards: which files form a split, and their row groups.

Layout (nanochat's): `<data_dir>/shard_00000.parquet, ...`, each with a `text` column and a few row groups; the
**last** shard is the validation split, all others are train.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from rlab.errors import DataError

Split = Literal["train", "val"]


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
    return len(row_groups(split_shards(data_dir, "train"))) + len(row_groups(split_shards(data_dir, "val")))


def row_groups(shards: list[Path]) -> list[tuple[int, int]]:
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
