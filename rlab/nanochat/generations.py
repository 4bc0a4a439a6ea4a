"""The nanochat generations rlab knows, by name, in the order detection tries them.

Checkpoints from between the two (January to March 2026: lambdas and value embeddings without smear/backout,
a 32-channel value gate, rotary base 10000, soft-cap 20) fit neither key set and are refused
(`rlab.nanochat.detect`). No torch at import: `rlab ls` and the preflight use this.
"""

from __future__ import annotations

from rlab.core.architecture import Architecture
from rlab.errors import CheckpointError
from rlab.nanochat.gen2025.architecture import NANOCHAT_2025
from rlab.nanochat.gen2026.architecture import NANOCHAT_2026

GENERATIONS: tuple[Architecture, ...] = (NANOCHAT_2025, NANOCHAT_2026)
ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in GENERATIONS}
DEFAULT_ARCHITECTURE = NANOCHAT_2025.name
"""What a from-scratch model is unless its spec names another."""


def get_architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise CheckpointError(
            f"Unknown architecture '{name}' (rlab knows {', '.join(ARCHITECTURES)}).",
            "The checkpoint was written by a newer tool than this rlab; update rlab.",
        ) from None
