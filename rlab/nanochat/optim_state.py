"""The optimizer state nanochat's shards hold, freed of the world size that wrote them.

Each generation's reader (`rlab.nanochat.gen*/optimizer.py`) turns one checkpoint's per-rank shards into a
`FullState`: AdamW moments and Muon momentum by nanochat parameter name, whole, as if one rank had held them.
`rlab.nanochat.optim_import` loads that into rlab's optimizers, each rank taking its own share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

ADAM_KEYS = ("exp_avg", "exp_avg_sq")


class ShardMismatch(Exception):
    """The shards are nanochat's but do not fit the model (or each other); the message says how."""


@dataclass
class FullState:
    """World-size-free optimizer state, keyed by nanochat parameter name."""

    format: str
    world_size: int
    step: int
    adam: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # name -> exp_avg, exp_avg_sq
    muon: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> momentum_buffer
    muon_momentum: float | None = None  # what nanochat's next step would use
    notes: list[str] = field(default_factory=list)  # state the format has and rlab cannot use


# name and shape of every parameter in nanochat's model order (the model file's key order)
ParamList = list[tuple[str, tuple[int, ...]]]
Reader = Callable[[list[Any], ParamList], "FullState | None"]
