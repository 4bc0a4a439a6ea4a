"""Evaluation settings shared by every tag of an experiment."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveInt

from rlab.spec.base import StrictModel

EvalName = Literal["bpb", "bpb_length", "core", "passkey", "copy_distance"]


class EvalSpec(StrictModel):
    """Which evals run and how big they are."""

    evals: tuple[EvalName, ...] = ("bpb", "bpb_length", "core", "passkey")
    """Evals to run: bpb (train/val), bpb_length (BPB vs context length), core (DCLM CORE), passkey,
    copy_distance (loss on a passage repeated at a known distance; not in the default list)."""
    bpb_tokens: PositiveInt = 262144
    """Tokens per split for train/val BPB."""
    length_multipliers: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
    """BPB-vs-length lengths as multiples of the model's training length (ignored if `lengths` is set)."""
    lengths: tuple[PositiveInt, ...] | None = None
    """Explicit context lengths in tokens for BPB-vs-length (and passkey, unless passkey_lengths is set)."""
    length_tokens: PositiveInt = 65536
    """Scored tokens per length for BPB-vs-length (capped by the long-document set)."""
    length_block: PositiveInt | None = None
    """BPB-vs-length scoring block B: each window scores its last B targets (left context L-B..L-1),
    the same targets at every length; null = the shortest length // 2 (see rlab.evals.bpb)."""
    core_bundle: Path | None = None
    """DCLM CORE bundle dir; null = <base_dir>/eval_bundle."""
    max_per_task: PositiveInt | None = None
    """Evaluate at most N examples per CORE task (deterministic subsample); null = all."""
    passkey_lengths: tuple[PositiveInt, ...] | None = None
    """Passkey prompt lengths in tokens; null = the BPB-vs-length lengths."""
    passkey_depths: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    """Where the key sits in the filler, as a fraction of the prompt."""
    passkey_trials: PositiveInt = 5
    """Seeded trials per (length, depth)."""
    copy_lengths: tuple[PositiveInt, ...] | None = None
    """copy_distance windows in tokens (the copy's distance grows with the window); null = the BPB-vs-length lengths."""
    copy_trials: PositiveInt = 32
    """copy_distance records per window (the independent units of its intervals)."""
    device_batch_size: PositiveInt = 8
    """Sequences per forward pass."""
    seed: int = Field(1234)
    """Seed for subsampling, few-shot draws and passkeys."""
