"""What every part of the trainer shares: the run's settings, model, optimizers, loader and counters.

`rlab.core.trainer.Trainer` sets these up once and is assembled from parts that each hold one concern (the
step, `rlab.core.train_step`; checkpoints, `rlab.core.train_checkpoint`; evals and samples,
`rlab.core.train_evals`); each part subclasses this so the attributes it reads are declared in one place.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rlab.core.precision import autocast_context

if TYPE_CHECKING:
    from rlab.core.batch_plan import BatchPlan
    from rlab.core.checkpoint_meta import LrPolicy
    from rlab.core.distributed import DistInfo
    from rlab.core.divergence import DivergenceWatch
    from rlab.core.gpt import GPT
    from rlab.core.heartbeat import HeartbeatThread
    from rlab.core.loader import TokenLoader
    from rlab.core.metrics import MemoryMeter, MetricsWriter
    from rlab.core.tokenizer import Tokenizer
    from rlab.core.train_start import StartPoint
    from rlab.paths import BaseLayout
    from rlab.spec.run import RunConfig
    from rlab.spec.train import LRSpec, TrainSpec


class TrainerState:
    """The attributes `Trainer.__init__` sets (and `run` updates), and the two helpers every part uses."""

    cfg: RunConfig
    info: DistInfo
    spec: TrainSpec
    layout: BaseLayout
    ckpt_dir: Path
    plan: BatchPlan
    device: Any  # torch.device
    tokenizer: Tokenizer
    token_bytes: Any  # (V,) tensor
    start: StartPoint
    end_step: int
    model: GPT
    amp_dtype: Any  # torch.bfloat16 or None
    compile_wanted: bool
    optimizers: list
    lr_policy: LrPolicy
    lr_spec: LRSpec
    train_model: Any  # the model the step calls: compiled, DDP-wrapped or plain
    _eager_model: Any  # the same, uncompiled (what a failed compile falls back to)
    compiled: bool
    compile_checked: bool
    flops_per_token: float
    peak_flops: float | None
    memory: MemoryMeter
    metrics: MetricsWriter
    tracker: Any  # rlab.tracking's tracker
    loader: TokenLoader
    skipped_total: int
    consecutive_skips: int
    tokens_trained: int
    run_tokens: int
    last_val_bpb: float | None
    written_steps: list[int]
    divergence: DivergenceWatch
    heartbeat: HeartbeatThread

    def resume_hint(self, before: int | None = None) -> str:
        """What to rerun with: the newest checkpoint of the tag (every one a save wrote is healthy,
        `rlab.core.train_checkpoint`), older than step `before` when given."""
        from rlab.paths import checkpoint_steps

        steps = [s for s in checkpoint_steps(self.ckpt_dir) if before is None or s < before]
        if not steps:
            return "rerun it from the start (--force): no checkpoint of this run is older."
        return f"resume from step {steps[-1]}, the newest healthy checkpoint: --resume --resume-from {steps[-1]}."

    def amp(self) -> contextlib.AbstractContextManager:
        return autocast_context(self.device, self.amp_dtype)

    def _make_loader(self, split: Literal["train", "val"], state: dict[str, Any] | None, after=None):
        from rlab.core.loader import TokenLoader

        return TokenLoader(
            self.layout.data_dir,
            self.tokenizer,
            split,
            self.plan.device_batch_size,
            self.plan.seq_len,
            rank=self.info.rank,
            world_size=self.info.world_size,
            device=self.device,
            seed=self.spec.seed,
            state=state,
            after=after,
        )
