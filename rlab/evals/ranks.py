"""How every eval splits its units over ranks and sums them back.

Rank r of W takes the units i = r (mod W) and writes their results into a tensor that has a row for every
unit (zero elsewhere); summing that tensor across ranks leaves each unit's row as the one rank that
computed it wrote it, so an eval's numbers do not depend on the world size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) under torch.distributed, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """`t` summed over every rank, in place (a no-op on one rank)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t
