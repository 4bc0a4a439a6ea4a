"""Which rank keeps which optimizer state, and how many bytes that is per rank.

One module decides ownership, so the optimizers (`rlab.core.muon`, `rlab.core.sharded_adamw`), their
checkpoint shards (`rlab.core.optim_shards`) and the memory plan (`optimizer_state_bytes`) always agree:

* **Muon** (the "matrix" group): matrices are bucketed by shape (shapes sorted, model order within a
  shape, as nanochat's DistMuon groups them) and dealt to the ranks round-robin, bucket after bucket
  (the n-th matrix dealt goes to rank ``n mod W``), so every rank gets an equal share of each size.
  Only its owner keeps its momentum buffer (the parameter's shape and dtype) and computes its update.
* **AdamW** (every other group): a parameter with at least `SMALL_PARAM` elements whose first dimension
  divides by W is cut into W equal row blocks, and rank r keeps `exp_avg`/`exp_avg_sq` for block r
  (nanochat's ZeRO-2 rule). Smaller or indivisible parameters are replicated: every rank keeps their
  whole state and updates them in full. Every rank also keeps a 0-d float32 `step` per AdamW parameter.

World size 1 (or sharding switched off) means rank 0 owns everything: today's replicated state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SMALL_PARAM = 1024  # below this many elements an AdamW parameter is replicated, as in nanochat 92d63d4
MATRIX_GROUP = "matrix"  # the parameter group Muon optimizes (`GPT.parameter_groups`)
STEP_BYTES = 4  # AdamW's per-parameter step count: a 0-d float32 tensor

Shape = tuple[int, ...]


def shape_buckets(shapes: Sequence[Shape]) -> list[list[int]]:
    """Indices of `shapes` grouped by shape: shapes in sorted order, indices in their given order."""
    return [
        [i for i, s in enumerate(shapes) if tuple(s) == shape] for shape in sorted({tuple(s) for s in shapes})
    ]


def muon_owners(shapes: Sequence[Shape], world_size: int) -> list[int]:
    """The rank that owns each matrix (by index): dealt round-robin in shape-bucket order."""
    owners = [0] * len(shapes)
    dealt = (i for bucket in shape_buckets(shapes) for i in bucket)
    for n, i in enumerate(dealt):
        owners[i] = n % world_size
    return owners


def adamw_rows(shape: Shape, world_size: int, rank: int) -> tuple[int, int] | None:
    """Rows [start, stop) of an AdamW parameter that `rank` keeps state for; None: the whole (replicated)."""
    numel = 1
    for d in shape:
        numel *= d
    if world_size == 1 or not shape or numel < SMALL_PARAM or shape[0] % world_size:
        return None
    block = shape[0] // world_size
    return rank * block, (rank + 1) * block


@dataclass(frozen=True)
class OptimizerStateBytes:
    """Optimizer-state bytes held by each rank (index = rank), split by optimizer."""

    muon: tuple[int, ...]
    adamw: tuple[int, ...]

    @property
    def per_rank(self) -> tuple[int, ...]:
        return tuple(m + a for m, a in zip(self.muon, self.adamw, strict=True))

    @property
    def max(self) -> int:
        """The largest rank's share: what every GPU must have room for."""
        return max(self.per_rank)


def optimizer_state_bytes(
    groups: Mapping[str, Sequence[Any]], world_size: int, dtype: Any = None, sharded: bool = True
) -> OptimizerStateBytes:
    """Bytes of optimizer state on each rank after the first step, for `GPT.parameter_groups()`-style groups.

    `groups` maps group name -> tensors (real or on the meta device; only `.shape`/`.dtype` are read);
    "matrix" is Muon's, every other group AdamW's, as `rlab.core.optim.build_optimizers` splits them.
    `dtype` (a torch dtype) overrides the parameters' own dtype for the state tensors (they follow the
    parameter's dtype); `sharded=False` gives the replicated layout at any world size.
    """
    world = world_size if sharded else 1
    ranks = range(world_size)

    def size(t: Any) -> int:
        return int((t.dtype if dtype is None else dtype).itemsize)

    muon = [0] * world_size
    adamw = [0] * world_size
    matrices = list(groups.get(MATRIX_GROUP, []))
    for p, owner in zip(matrices, muon_owners([tuple(p.shape) for p in matrices], world), strict=True):
        for r in ranks if world == 1 else [owner]:
            muon[r] += p.numel() * size(p)
    for name, params in groups.items():
        if name == MATRIX_GROUP:
            continue
        for p in params:
            row_bytes = p.numel() // p.shape[0] * size(p) if p.dim() else size(p)
            for r in ranks:
                rows = adamw_rows(tuple(p.shape), world, r if world > 1 else 0)
                held = p.numel() * size(p) if rows is None else (rows[1] - rows[0]) * row_bytes
                adamw[r] += 2 * held + STEP_BYTES
    return OptimizerStateBytes(tuple(muon), tuple(adamw))
