"""A run that diverges without NaN: steps that train nothing, or a loss past a bound, for too long in a row.

An LR far too high can leave every weight where the gradient is exactly zero (saturated soft-cap, dead
units): the loss sits at ln(vocab), the grad norm at 0.0, no step is non-finite, so the skip rule never fires
and the run would end `done`. For a study that is a silently dead arm; `DivergenceWatch` turns it into a
failure (`rlab.errors.Diverged`) after `train.diverged_after` such steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

UNIFORM_LOSS_EPS = 1e-3
"""How close to ln(vocab) (the loss of a uniform guess) a loss counts as having learnt nothing."""


@dataclass
class DivergenceWatch:
    """Counts dead steps in a row from the train records; `check` says why once there are `after` of them."""

    vocab_size: int
    after: int | None
    max_loss: float | None
    warmup_steps: int
    run_start_step: int
    streak: int = 0
    first_dead: int | None = None
    """The step the current streak began at (the weights before it are the last live ones)."""

    def dead_reason(self, record: dict[str, Any]) -> str | None:
        """Why this step trained nothing (or too badly), or None for a live step."""
        loss, norm = record["loss"], record["grad_norm"]
        uniform = math.log(self.vocab_size)
        bound = self.max_loss if self.max_loss is not None else 2 * uniform
        if loss > bound:
            return f"loss {loss:.4g} > {bound:.4g}" + (" (2 x ln(vocab))" if self.max_loss is None else "")
        if norm == 0.0:
            return f"grad norm exactly 0 (loss {loss:.4f})"
        past_warmup = record["step"] - self.run_start_step > self.warmup_steps
        if past_warmup and abs(loss - uniform) < UNIFORM_LOSS_EPS:
            return f"loss {loss:.4f} = ln(vocab {self.vocab_size}), a uniform guess"
        return None

    def check(self, record: dict[str, Any]) -> str | None:
        """Feed one train record; the reason to stop once `after` dead steps came in a row, else None."""
        if self.after is None or not (math.isfinite(record["loss"]) and math.isfinite(record["grad_norm"])):
            return (
                None  # a skipped step neither counts nor ends a streak: `max_consecutive_skips` is its rule
            )
        reason = self.dead_reason(record)
        if reason is None:
            self.streak, self.first_dead = 0, None
            return None
        self.streak += 1
        if self.first_dead is None:
            self.first_dead = record["step"]
        return reason if self.streak >= self.after else None
