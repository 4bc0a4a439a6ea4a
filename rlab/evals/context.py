"""What an eval's run function gets (`EvalContext`) and gives back (`EvalOutcome`).

def run(ctx: EvalContext) -> EvalOutcome     # each eval's `run` module; the runner calls it
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlab.core.checkpoint_meta import CheckpointMeta
from rlab.evals.lengths import eval_lengths
from rlab.evals.progress import ProgressFn
from rlab.records.base import Record
from rlab.records.sections import Section
from rlab.records.units import BpbUnit
from rlab.spec.eval import EvalSpec

Table = tuple[type[Record], Sequence[Record]]
"""A CSV: its row model (whose `columns` it has) and its rows."""


@dataclass
class EvalContext:
    """What every eval gets: the loaded model and tokenizer, settings, paths and ranks."""

    model: Any
    tokenizer: Any
    meta: CheckpointMeta
    spec: EvalSpec
    device: Any
    base_dir: Path
    out_dir: Path
    variant_csv: Path
    """The experiment's results_<variant>.csv, for an eval that writes one (`EvalDefinition.variant_csv`)."""
    token_bytes: Any
    name: str = "model"
    """Label for errors and logs, e.g. 'd20-pi step 21400'."""
    rank: int = 0
    world_size: int = 1
    autocast: Callable[[], AbstractContextManager] = nullcontext
    shared: dict[str, Any] = field(default_factory=dict)
    """What several evals of one worker share (the long-document set)."""
    progress: ProgressFn | None = None
    """The running eval's progress callback (`rlab.evals.progress`; the runner sets one per eval)."""

    @property
    def train_seq_len(self) -> int:
        return self.meta.sequence_len

    @property
    def original_len(self) -> int:
        """L0: the base's training length (every variant's RoPE config records it)."""
        return int(self.model.rope.original_len or self.train_seq_len)

    @property
    def target_len(self) -> int:
        """T: the continued-training length (eval.target_len; the tag's own training length when unset)."""
        return int(self.spec.target_len or self.train_seq_len)

    def eval_lengths(self) -> list[int]:
        """The experiment's eval lengths (`rlab.evals.lengths`): L0 = the base's training length (every tag's
        RoPE config records it), T = eval.target_len (the continued-training length)."""

        return eval_lengths(self.spec, self.original_len, self.target_len)

    @property
    def batch_tokens(self) -> int:
        """Tokens per forward pass: device_batch_size sequences of the training length."""
        return self.spec.device_batch_size * self.train_seq_len


@dataclass
class EvalOutcome:
    metric: Section
    """This eval's section of eval.json."""
    tables: dict[Path, Table] = field(default_factory=dict)
    units: list[BpbUnit] = field(default_factory=list)
    data_hash: str | None = None
    """What was scored (see `rlab.records.provenance.SectionRun.data_hash`)."""
    settings_extra: dict[str, Any] = field(default_factory=dict)
    """Facts of this run that change what the section measures (e.g. the BPB window), hashed with its settings."""
