"""Memory plans' counts kept on disk, one small JSON per shape, so a shape is traced once per code version.

What a plan measures (`rlab.memory.counts.StepCounts`: the traced step and torch.compile's saved bytes)
is a pure function of the training shape (model config, rows, ranks, accumulation, dtype, optimizer
sharding, compile) and of the code that counted it: rlab's own source and torch's version. The file is
named by a hash of all of these, under `rlab.paths.memory_plan_cache_dir` (``$RLAB_CACHE_DIR``, else
``$XDG_CACHE_HOME/rlab``, else ``~/.cache/rlab``), and written atomically. A file that cannot be read
or parsed as a `PlanCacheFile` of the same key is ignored and rewritten; a cache that cannot be written
only costs the next plan its trace. Reading a hit imports no torch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from rlab.atomic_io import write_text_atomic
from rlab.memory.counts import StepCounts
from rlab.memory.shape import TrainShape
from rlab.paths import memory_plan_cache_dir

logger = logging.getLogger(__name__)

CACHE_FORMAT: Final = 1


class PlanCacheFile(BaseModel):
    """One cached plan: the inputs it was counted from (the file's name hashes them) and the counts."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = CACHE_FORMAT
    key: str
    shape: TrainShape
    rlab_source: str
    """sha256 of rlab's Python source (`source_fingerprint`)."""
    torch_version: str
    counts: StepCounts


@functools.cache
def source_fingerprint() -> str:
    """sha256 (16 hex) of every Python file of the rlab package this process runs, by path and content:
    any change to the model, the optimizers or the tracer makes a new key (a git commit would miss local edits)."""
    root = Path(__file__).resolve().parents[1]  # the rlab package
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@functools.cache
def torch_version() -> str:
    """The installed torch's version, read from its package metadata (no `import torch`)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover - torch is a dependency
        return "unknown"


def _key_inputs(shape: TrainShape) -> dict[str, Any]:
    return {
        "format": CACHE_FORMAT,
        "shape": shape.model_dump(mode="json"),
        "rlab_source": source_fingerprint(),
        "torch": torch_version(),
    }


def plan_key(shape: TrainShape) -> str:
    """The cache key of `shape`'s counts with this code: a hash of the shape, rlab's source and torch's version."""
    raw = json.dumps(_key_inputs(shape), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def cache_file(shape: TrainShape) -> Path:

    return memory_plan_cache_dir() / f"{plan_key(shape)}.json"


def read_cached(shape: TrainShape) -> StepCounts | None:
    """The cached counts of `shape` with this code, or None (absent, unreadable, corrupt, or not this shape's)."""
    path = cache_file(shape)
    try:
        entry = PlanCacheFile.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        logger.debug("ignoring the memory plan cache file %s: %s", path, exc)
        return None
    if entry.key != path.stem or entry.shape != shape:
        return None
    return entry.counts


def write_cached(shape: TrainShape, counts: StepCounts) -> None:
    """Keep `shape`'s counts for the next plan (atomically; a cache that cannot be written is skipped)."""

    path = cache_file(shape)
    entry = PlanCacheFile(
        key=path.stem,
        shape=shape,
        rlab_source=source_fingerprint(),
        torch_version=torch_version(),
        counts=counts,
    )
    try:
        write_text_atomic(path, entry.model_dump_json(indent=1) + "\n")
    except OSError as exc:
        logger.debug("memory plan not cached (%s)", exc)


def cached_counts(shape: TrainShape, count: Callable[[TrainShape], StepCounts]) -> StepCounts:
    """`shape`'s counts from the cache, else `count(shape)`, kept for next time."""
    hit = read_cached(shape)
    if hit is not None:
        return hit
    counts = count(shape)
    write_cached(shape, counts)
    return counts
