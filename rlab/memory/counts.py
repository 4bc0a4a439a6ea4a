"""What a memory plan measures, as plain numbers: the traced step's bytes and torch.compile's saved bytes.

These records are the costly part of a plan (`rlab.memory.trace`, `rlab.memory.compiled` run the model
under fake tensors) and depend on the shape alone, not on the GPU it is checked against, so they are what
the plan cache keeps (`rlab.memory.plan_cache`). This module imports no torch: a cached plan is read
without it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StepTrace(BaseModel):
    """Bytes per rank, as counted in one traced step (before DDP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    parameters: int
    gradients: int
    optimizer: int
    weight_copies: int
    """The casts autocast keeps of the weights for the backward (bf16)."""
    saved: dict[str, int]
    """Saved activations by region: embed, layers, head."""
    head_transient: int
    """The most the loss head holds on top of what it keeps, forward or backward."""
    peak: int
    peak_phase: str
    peak_parts: dict[str, int] = Field(default_factory=dict)
    """What was alive at the peak, by kind."""

    @property
    def activations(self) -> int:
        return sum(self.saved.values())


class CompiledSaved(BaseModel):
    """Bytes the compiled forward keeps for the backward, per rank."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total: int
    per_layer: float
    """A block's share (the mean over one period of blocks that differ, e.g. by value embeddings)."""
    n_layer: int

    @property
    def outside_blocks(self) -> float:
        """The embedding and the loss head."""
        return self.total - self.per_layer * self.n_layer


class StepCounts(BaseModel):
    """Everything a training plan measures of one shape: the traced step, and torch.compile's saved
    bytes when the run is compiled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trace: StepTrace
    compiled: CompiledSaved | None = None
