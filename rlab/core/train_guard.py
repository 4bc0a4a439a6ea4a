"""What stops a run that no longer trains: too many skipped steps in a row, or a divergence without NaN.

Both read the step's metrics record after it is written; the error names the checkpoint to resume from
(`rlab.core.train_checkpoint.resume_hint`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlab.core.divergence import DivergenceWatch
from rlab.core.train_checkpoint import resume_hint
from rlab.errors import Diverged, TrainingError


@dataclass
class RunGuard:
    """The stop rules of one run (`train.max_consecutive_skips`, `rlab.core.divergence`)."""

    tag: str
    ckpt_dir: Path
    max_consecutive_skips: int
    divergence: DivergenceWatch

    def check_skips(self, record: dict[str, Any], in_a_row: int) -> None:
        """TrainingError once `in_a_row` steps up to this record's were skipped."""
        if in_a_row < self.max_consecutive_skips:
            return
        raise TrainingError(
            f"Stopped {self.tag} at step {record['step']}: {in_a_row} consecutive steps skipped "
            f"(last: {record.get('skip_reason')}).",
            hint="Lower train.lr, set train.grad_clip or raise train.explode_threshold, then "
            + resume_hint(self.ckpt_dir),
        )

    def check_divergence(self, record: dict[str, Any]) -> None:
        """`Diverged` once `train.diverged_after` dead steps came in a row."""
        reason = self.divergence.check(record)
        if reason is None:
            return
        step = record["step"]
        first = self.divergence.first_dead or step
        raise Diverged(
            f"Stopped {self.tag} at step {step}: diverged ({self.divergence.streak} steps in a row since step "
            f"{first}; last: {reason}).",
            hint="Lower train.lr or set train.grad_clip, then " + resume_hint(self.ckpt_dir, before=first),
        )
