"""Activation checkpointing in the memory plan: the least of it that fits, and the longest length per GPU.

Each setting is planned exactly (the trace and torch.compile's partitioner run with the blocks checkpointed,
`rlab.activation_checkpointing`), so these functions only decide which plans to make. A checkpointed block
keeps its input instead of its activations, so the peak falls about linearly in the number of checkpointed
blocks: `rlab.memory.plan.least_checkpointing` starts at the first setting that line predicts to fit and plans upwards from
there until one fits. At one row per rank the peak is affine in the length (every saved tensor, the rotary
tables and the kernels' working memory grow with the tokens; weights and optimizer state do not), so
`longest_rows` solves for the longest length from the plans at two lengths.
"""

from __future__ import annotations

from rlab.memory.plan import FIT_FRACTION, LongestRow, plan_training
from rlab.memory.shape import TrainShape

GPU_SIZES_GIB = (24.0, 40.0, 80.0, 141.0)
LENGTH_STEP = 1024  # the longest lengths are rounded down to a multiple of this


def _longest(shape: TrainShape, budget_gib: float, lengths: tuple[int, int]) -> int | None:
    """The longest length (a multiple of LENGTH_STEP) whose peak, on the line through the plans at
    `lengths`, is within `budget_gib`; None when not even LENGTH_STEP is."""
    short, long = (plan_training(shape.with_seq_len(n), suggest=False) for n in lengths)
    slope = (long.peak_gib - short.peak_gib) / (lengths[1] - lengths[0])
    if slope <= 0:
        return None
    best = int(lengths[0] + (budget_gib - short.peak_gib) / slope) // LENGTH_STEP * LENGTH_STEP
    return best if best >= LENGTH_STEP else None


def longest_rows(shape: TrainShape, sizes: tuple[float, ...] = GPU_SIZES_GIB) -> list[LongestRow]:
    """Per GPU size, the longest length one row per rank trains at, without and with every block
    checkpointed (the rest of `shape` as given), from the plans at seq_len / 2 and seq_len."""
    row = shape.with_batch(1, shape.grad_accum_steps)
    lengths = (max(LENGTH_STEP, shape.seq_len // 2), max(2 * LENGTH_STEP, shape.seq_len))
    out = []
    for gib in sizes:
        budget = FIT_FRACTION * gib
        out.append(
            LongestRow(
                gpu_memory_gib=gib,
                without_checkpointing=_longest(row.with_checkpointing("off"), budget, lengths),
                with_checkpointing=_longest(row.with_checkpointing("all"), budget, lengths),
            )
        )
    return out
