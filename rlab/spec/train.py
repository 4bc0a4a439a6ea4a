"""Continued-pretraining settings: model shape (from scratch only), batch, LR schedule, cadences."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from rlab.activation_checkpointing import SETTING_PATTERN
from rlab.spec.base import Cadence, StrictModel
from rlab.spec.bounds import (
    MAX_LENGTHS,
    MAX_SEEDS,
    DeviceBatch,
    Every,
    InRange,
    Length,
    RotaryBase,
    StepCount,
    TokenCount,
)


class ModelSpec(StrictModel):
    """Architecture of a model trained from scratch (the demo's base). Continued runs take it from the checkpoint."""

    n_layer: Annotated[int, InRange(1, 1024)] = 4
    """Number of transformer blocks (nanochat's depth)."""
    n_embd: Annotated[int, InRange(1, 2**16)] = 256
    """Model width."""
    n_head: Annotated[int, InRange(1, 1024)] = 4
    """Query heads; head_dim = n_embd / n_head must be even."""
    n_kv_head: Annotated[int, InRange(1, 1024)] | None = None
    """Key/value heads (GQA); null = n_head."""
    architecture: Literal["nanochat-2025", "nanochat-2026"] = "nanochat-2025"
    """Which nanochat generation's parts the model has (rlab.core.architecture), with its rotary base
    (2025: 10000, 2026: 100000). nanochat-2026 adds value embeddings, residual scalars, backout, sliding
    windows and smear: the previous token's embedding mixed into each position, a shortcut that lets a
    small model learn to copy from context in fewer tokens."""
    rotary_base: RotaryBase | None = None
    """RoPE base theta; null = the architecture's. It is written into the checkpoint, and every variant
    that leaves its base to the checkpoint (clones, zero-shot arms) gets it. A small base makes the
    slowest frequencies turn within a few times the training length, as they do in large models at
    long lengths."""
    window_pattern: str = Field("L", pattern=r"^[SL]+$")
    """nanochat-2026 only: per layer, S (a short sliding window) or L (full context), tiled over the
    layers; the last layer is always L."""

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.architecture == "nanochat-2025" and self.window_pattern != "L":
            raise ValueError(
                "window_pattern: sliding windows are a nanochat-2026 part (set architecture: "
                f"nanochat-2026, or window_pattern: L; got {self.window_pattern!r})"
            )
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd: must be divisible by n_head (got {self.n_embd} and {self.n_head})")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"n_head: head_dim = n_embd/n_head must be even (got {self.n_embd // self.n_head})"
            )
        kv = self.n_kv_head or self.n_head
        if self.n_head % kv:
            raise ValueError(f"n_kv_head: must divide n_head (got {kv} and {self.n_head})")
        return self


class LRSpec(StrictModel):
    """Per-group learning rates (nanochat's) and the schedule: warmup, constant, linear warmdown."""

    matrix_lr: float = Field(0.02, gt=0)
    """Muon LR for the transformer's 2-D weight matrices."""
    embedding_lr: float = Field(0.2, gt=0)
    """AdamW LR for the token embedding (scaled by (n_embd/768)^-0.5 as nanochat does)."""
    unembedding_lr: float = Field(0.004, gt=0)
    """AdamW LR for lm_head (scaled like embedding_lr)."""
    scalar_lr: float = Field(0.5, gt=0)
    """nanochat-2026 only: AdamW LR for x0_lambdas (resid_lambdas get 1% of it), as nanochat's scalar_lr."""
    weight_decay: float = Field(0.0, ge=0)
    """Weight decay for the Muon group."""
    warmup_steps: StepCount = 20
    """Linear warmup steps at the start of this run (a fresh optimizer needs them)."""
    warmdown_frac: float = Field(0.2, ge=0, le=1)
    """Fraction of the run's steps over which the LR decays linearly at the end."""
    final_lr_frac: float = Field(0.0, ge=0, le=1)
    """LR at the very end, as a fraction of the peak."""


class SeqLenPhase(StrictModel):
    """One phase of a sequence-length warmup: `steps` optimizer steps on rows of `seq_len` tokens."""

    seq_len: Length
    steps: Every


class TrainSpec(StrictModel):
    """How one run trains. Steps count optimizer updates in *this* run (added to the start step)."""

    seq_len: Length = 1024
    """Training sequence length in tokens. Continued runs: left unset, it is the experiment's target_len."""
    steps: StepCount = 100
    """Optimizer steps to run. 0 = training-free: each variant's tag is the base with its RoPE applied (tag
    <tag>-zeroshot, a clone plus meta, no torchrun)."""
    seq_len_warmup: list[SeqLenPhase] = Field([], max_length=MAX_LENGTHS)
    """Sequence-length warmup (a curriculum): the run's first steps split each row of seq_len tokens into
    rows of the phase's length, in order, then train at seq_len. Tokens per step stay the same; only the
    attention span is shorter. A small model learns to copy from context (an induction head) within a few
    hundred steps in short windows and hardly at all in long ones (experiments/probes/induction.py), and
    the copy it learns short carries to longer windows. Each length must divide seq_len."""
    seeds: Annotated[int, InRange(1, MAX_SEEDS)] = 1
    """Training replicates per variant: replicate i (tag suffix -seed<i> for i >= 1) trains with seed + i, i.e. a
    different data order on the same token budget from the same data start. The report averages them.
    pretrain.train.seeds: base replicates `rlab pretrain` trains (<base>, <base>-seed<i>; see replicate_base)."""
    replicate_base: bool = False
    """Continued runs: replicate the base too. Seed replicate i (and its training-free arm, tag
    <tag>-seed<i>-zeroshot, with zero_shot) starts from base replicate i (<base>, <base>-seed<i>: `rlab
    pretrain` trains them with pretrain.train.seed + i) instead of the one base, so the seed spans
    pretraining as well as continuation noise and the report's per-seed differences pair arms on the same
    base. Needs seeds >= 2 and every base replicate at the base step."""
    zero_shot: bool = False
    """Also make each variant's training-free arm (<tag>-zeroshot: the base with the variant's RoPE, nothing
    trained) and evaluate the base itself, so the report shows zero-shot and continued side by side."""
    device_batch_size: DeviceBatch = 8
    """Sequences per rank per micro-batch."""
    total_batch_size: TokenCount | None = None
    """Tokens per optimizer step across all ranks; null = one micro-batch per rank (no accumulation).
    Must equal device_batch_size * seq_len * world_size * grad_accum_steps for a whole grad_accum_steps."""
    lr: LRSpec = LRSpec()
    grad_clip: float | None = Field(1.0, gt=0)
    """Clip the global grad norm to this; null disables clipping (the norm is still computed)."""
    explode_threshold: float | None = Field(None, gt=0)
    """Skip the update when the grad norm exceeds this (null: only non-finite norms are skipped)."""
    max_consecutive_skips: Every = 10
    """Stop with an error after this many skipped (non-finite or exploding) steps in a row."""
    diverged_after: Every | None = 20
    """Stop the run as `diverged` after this many steps in a row that train nothing (grad norm exactly 0, or, past
    the LR warmup, the loss of a uniform guess, ln(vocab), within 1e-3) or whose loss is above max_loss; null
    = never. A run that diverges without NaN is a dead arm, never a finished one."""
    max_loss: float | None = Field(None, gt=0)
    """The loss above which a step counts towards diverged_after; null = 2 x ln(vocab)."""
    stall_timeout_s: Annotated[int, InRange(1, 86_400)] = 300
    """A rank silent for this many seconds past the slowest step seen ends the job as stalled (rlab's watchdog;
    each rank heartbeats); the ranks' collective timeout is 3x this, so the watchdog names the rank first."""
    eval_every: Cadence = 100
    """Run val BPB every N steps (and at the end); `never` disables."""
    eval_tokens: TokenCount = 65536
    """Validation tokens per in-training val BPB."""
    save_every: Cadence = None
    """Save a checkpoint every N steps; `never` = only at the end."""
    keep_last: Every | None = None
    """Keep only the newest K checkpoints written by this run (the source step is never deleted)."""
    sample_every: Cadence = None
    """Print a short sample every N steps; `never` disables."""
    seed: int = 42
    """Seed for weights (from scratch), data order and sampling."""
    data_start: Literal["after_base", "beginning"] = "after_base"
    """Continued runs: start reading train data where the base checkpoint's loader stopped (after_base, so
    every variant trains on text the base has not seen), or at the beginning of the data."""
    data_draw: Annotated[int, InRange(0, MAX_SEEDS)] = 0
    """Which draw of the train data a continued run reads (set by the plan: seed replicate i gets draw i). 0: the
    data in the order the base's loader left it. i >= 1: the row groups the base had not reached, in an order
    shuffled by this run's seed, so replicates train on different text, none of it seen by the base. A continued
    run starts from a copied checkpoint, so without this its seed would change nothing (no init, no dropout)."""
    compile: bool | None = None
    """torch.compile the model; null = on for CUDA, off on CPU."""
    activation_checkpointing: Annotated[str, Field(pattern=SETTING_PATTERN)] = "auto"
    """Blocks that keep only their input and rerun their forward in the backward: off, all, every-k (blocks 0,
    k, 2k, ...), or auto: the least recomputation the memory plan finds fitting, chosen by `rlab continue`'s
    preflight on a GPU launch (says so in the dry run); off where nothing was planned (CPU)."""
    shard_optimizer: bool = True
    """Shard the Muon and AdamW state across ranks (each keeps and computes about 1/world_size of it, then the
    updated weights are all-gathered); false keeps the whole state on every rank. No effect on one process."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Compute dtype; auto = bf16 autocast where the device supports it, fp32 otherwise. Master weights stay fp32."""
    peak_flops: float | None = Field(None, gt=0)
    """Device peak FLOP/s for MFU; null = a known GPU's bf16 peak, or report achieved FLOP/s only."""

    @model_validator(mode="after")
    def _check_warmup(self) -> TrainSpec:
        # a continued run's seq_len left unset is the experiment's target_len, checked once it is known
        if "seq_len" in self.model_fields_set and (problem := self.warmup_problem()):
            raise ValueError(problem)
        warmup = sum(phase.steps for phase in self.seq_len_warmup)
        if self.steps and warmup > self.steps:
            raise ValueError(
                f"seq_len_warmup: its phases take {warmup} steps, more than the run's {self.steps}"
            )
        if self.replicate_base and self.seeds < 2:
            raise ValueError(f"replicate_base: needs seeds >= 2, one base per seed (got seeds {self.seeds})")
        return self

    def warmup_problem(self) -> str | None:
        """Why seq_len_warmup does not fit seq_len, or None."""
        for phase in self.seq_len_warmup:
            if phase.seq_len >= self.seq_len or self.seq_len % phase.seq_len:
                return (
                    f"seq_len_warmup: each length must be shorter than seq_len and divide it "
                    f"(got {phase.seq_len} for seq_len {self.seq_len})"
                )
        return None

    def seq_len_at(self, i: int) -> int:
        """Row length at the run's step `i` (0-based): the warmup phase's, then seq_len."""
        for phase in self.seq_len_warmup:
            if i < phase.steps:
                return phase.seq_len
            i -= phase.steps
        return self.seq_len
