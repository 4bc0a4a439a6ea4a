"""Learning-rate schedule for continued pretraining: linear warmup, constant, linear warmdown.

The schedule is a multiplier on each parameter group's peak LR, a pure function of the
position inside the run (`i` = optimizer steps already taken by this run, 0-based). Resuming
only needs that position back, which is why it is stored in checkpoint meta.

    mult
    1.0 |    ______________
        |   /              \\
        |  /                \\
  final | /                  \\__
        +--------------------------> i
          warmup     warmdown (last warmdown_frac of the steps)
"""

from __future__ import annotations

import math

from rlab.spec.train import LRSpec


def warmdown_steps(total_steps: int, warmdown_frac: float) -> int:
    """Steps at the end of the run over which the LR decays (rounded up, so a nonzero fraction acts)."""
    return min(total_steps, math.ceil(warmdown_frac * total_steps))


def lr_multiplier(i: int, total_steps: int, lr: LRSpec) -> float:
    """LR multiplier for the run's step `i` (0-based) of `total_steps`."""
    if i < lr.warmup_steps:
        warm = (i + 1) / lr.warmup_steps
    else:
        warm = 1.0
    down_len = warmdown_steps(total_steps, lr.warmdown_frac)
    remaining = total_steps - i  # steps left including this one
    if down_len > 0 and remaining <= down_len:
        progress = remaining / down_len  # 1 at the start of warmdown, 1/down_len at the last step
        down = progress + (1.0 - progress) * lr.final_lr_frac
    else:
        down = 1.0
    return min(warm, down)
