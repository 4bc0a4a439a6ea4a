"""The batch arithmetic of a training run: how many micro-batches make one optimizer step.

total_batch_size = device_batch_size x seq_len x world_size x grad_accum_steps; a total that does not divide
is a spec error, raised before the trainer builds anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlab.errors import SpecError
from rlab.spec.train import TrainSpec


@dataclass(frozen=True)
class BatchPlan:
    device_batch_size: int
    seq_len: int
    world_size: int
    grad_accum_steps: int

    @property
    def tokens_per_micro_step(self) -> int:
        return self.device_batch_size * self.seq_len * self.world_size

    @property
    def tokens_per_step(self) -> int:
        return self.tokens_per_micro_step * self.grad_accum_steps


def plan_batch(spec: TrainSpec, world_size: int) -> BatchPlan:
    """Gradient-accumulation steps for the global batch, or a one-line SpecError when it does not divide."""
    per_micro = spec.device_batch_size * spec.seq_len * world_size
    total = spec.total_batch_size
    if total is None:
        return BatchPlan(spec.device_batch_size, spec.seq_len, world_size, 1)
    if total % per_micro:
        lower = max(per_micro, total // per_micro * per_micro)
        raise SpecError(
            f"train.total_batch_size={total} tokens is not a multiple of device_batch_size x seq_len x "
            f"world_size = {spec.device_batch_size} x {spec.seq_len} x {world_size} = {per_micro} tokens.",
            hint=f"Use a multiple of {per_micro} (e.g. {lower} or {lower + per_micro}), "
            "or change train.device_batch_size / the number of processes.",
        )
    return BatchPlan(spec.device_batch_size, spec.seq_len, world_size, total // per_micro)
