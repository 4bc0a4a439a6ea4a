"""Bits per byte on the train/val splits (nanochat's metric), and the shared per-unit reduction.

BPB = sum of nats over target tokens / (ln 2 * sum of the UTF-8 bytes of those targets).
Dividing by bytes rather than tokens makes models with different tokenizers comparable, and
it is nanochat's definition, so its numbers are what users compare against. Targets that are
special tokens (0 bytes in `token_bytes`) or ignored (-1) count neither nats nor bytes.
Under torch.distributed each rank scores its own units and the per-unit sums are all-reduced,
so every rank ends with the same totals.

BPB vs context length lives in `rlab.evals.bpb_length`; the sliding-window (YaRN-comparable)
protocol in `rlab.evals.sliding_ppl`.

Every eval reports per-unit (nats, bytes) so that the report can bootstrap paired differences
between variants: a unit is one eval batch (identical across variants because the loader is
deterministic).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch

from rlab.core.bpb import score_tokens
from rlab.evals.stats import ratio_ci

log = logging.getLogger(__name__)

LN2 = math.log(2.0)


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def _reduce_units(units, docs: int = 0) -> BpbResult:
    """Sum per-unit (nats, bytes, tokens) rows across ranks into a `BpbResult` that keeps the units."""
    _all_reduce_sum(units)
    rows = units.tolist()
    return BpbResult(
        nats=sum(r[0] for r in rows),
        bytes=sum(r[1] for r in rows),
        tokens=int(sum(r[2] for r in rows)),
        units=[(r[0], r[1]) for r in rows],
        docs=docs,
    )


@dataclass
class BpbResult:
    """Totals and per-unit sums of one BPB measurement."""

    nats: float
    bytes: float
    tokens: int
    units: list[tuple[float, float]] = field(default_factory=list)
    """(nats, bytes) per unit, in a fixed order."""
    docs: int = 0

    @property
    def bpb(self) -> float:
        return self.nats / (LN2 * self.bytes) if self.bytes > 0 else float("nan")

    def ci(self) -> tuple[float, float]:
        _, lo, hi = ratio_ci([u[0] for u in self.units], [u[1] for u in self.units])
        return lo / LN2, hi / LN2

    def summary(self) -> dict:
        lo, hi = self.ci()
        return {"bpb": self.bpb, "ci_low": lo, "ci_high": hi, "tokens": self.tokens}


def evaluate_bpb(model, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], steps: int, token_bytes) -> BpbResult:
    """BPB over `steps` batches of (inputs, targets), each (B, T); one unit per step.

    Each rank passes its own batches; per-step sums are added across ranks, so unit i is the
    i-th global batch.
    """
    it: Iterator = iter(batches)
    device = token_bytes.device
    units = torch.zeros(steps, 3, dtype=torch.float64, device=device)  # (steps, [nats, bytes, tokens])
    for step in range(steps):
        x, y = next(it)
        nats, nbytes, ntok = score_tokens(model, x, y, token_bytes)
        units[step, 0], units[step, 1], units[step, 2] = nats.sum(), nbytes.sum(), ntok.sum()
    return _reduce_units(units)
