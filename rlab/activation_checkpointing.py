"""Activation checkpointing: which blocks keep only their input and rerun their forward in the backward.

`train.activation_checkpointing` names it: `off` (none), `all` (every block), `every-k` (blocks 0, k, 2k, ...),
or `auto`, which the memory plan resolves before a GPU launch to the least recomputation that fits
(`rlab.memory.plan.least_checkpointing`; a run that was not planned, e.g. on a CPU, trains with `off`).
A checkpointed block saves its inputs instead of its activations (`torch.utils.checkpoint`, non-reentrant,
which torch.compile traces); the loss is the same to the float, a training step runs the block's forward
twice. No torch here: the spec and the planner read these names without it.
"""

from __future__ import annotations

import re
from typing import Final

SETTING_PATTERN: Final = r"^(auto|off|all|every-[1-9][0-9]{0,3})$"
"""What `train.activation_checkpointing` accepts."""


def every(setting: str) -> int | None:
    """k of a resolved setting: 1 for `all`, k for `every-k`, None for `off` (auto is not resolved)."""
    if setting == "all":
        return 1
    if setting == "off":
        return None
    match = re.fullmatch(r"every-([0-9]+)", setting)
    if match is None:
        raise ValueError(f"activation checkpointing {setting!r} is not resolved (off, all or every-k)")
    return int(match.group(1))


def checkpointed_layers(setting: str, n_layer: int) -> frozenset[int]:
    """The blocks a resolved setting checkpoints."""
    k = every(setting)
    return frozenset() if k is None else frozenset(range(0, n_layer, k))


def candidates(n_layer: int) -> list[str]:
    """What `auto` chooses from, by increasing recomputation (number of blocks checkpointed), each count
    once: off, every-4, every-3, every-2, all. Small k only: the planner counts torch.compile's choice on a
    period of lcm(k, the architecture's) blocks (`rlab.memory.compiled.layer_period`)."""
    out, counts = [], set()
    for setting in ("off", "every-4", "every-3", "every-2", "all"):
        count = len(checkpointed_layers(setting, n_layer))
        if count not in counts:
            counts.add(count)
            out.append(setting)
    return out
