"""Evaluation settings shared by every tag of an experiment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, PositiveFloat, PositiveInt, StringConstraints, field_validator

from rlab.evals import catalog
from rlab.spec.base import StrictModel
from rlab.spec.bounds import (
    MAX_LENGTHS,
    DeviceBatch,
    EvalLength,
    InRange,
    Length,
    NonEmpty,
    TokenCount,
    Trials,
)

MAX_CHOICES = 1000
"""Candidates per likelihood-scored retrieval item (each one more packed continuation of the prompt)."""

if TYPE_CHECKING:
    EvalName = str
else:
    EvalName = Literal[catalog.names()]
"""An eval of the catalog (`rlab.evals.catalog`: one package per eval under rlab/evals/)."""
RulerTaskName = Literal["niah_multikey", "niah_multivalue", "vt", "cwe"]
PplProtocol = Literal["same_targets", "sliding", "truncated"]
AttentionWindows = Literal["extend", "scale", "capped"]
"""How windowed layers (nanochat-2026 `window_pattern`) meet an input longer than the model's sequence_len."""
CoreTaskPattern = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.*?!\[\]-]+$"
    ),
]
"""A CORE task label of the bundle's core.yaml, or a shell glob over them (`arc_*`)."""
PASSKEY_MAX_DEPTH = 0.9
"""The needle is placed after at most this fraction of the filler, so filler always separates it from the question."""


def _evals_description() -> str:
    """The `evals` field's documentation, from the catalog: each eval with what it measures."""
    listed = [
        f"{d.name} ({_lower_first(d.help.rstrip('.'))}{'' if d.default else '; not in the default list'})"
        for d in catalog.definitions()
    ]
    return "Evals to run: " + ", ".join(listed) + "."


def _lower_first(text: str) -> str:
    """`Train/val BPB` -> `train/val BPB`; an acronym (`DCLM CORE`, `RULER-style`) stays as it is."""
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


class TargetMde(StrictModel):
    """The smallest true differences between two arms the experiment should detect: `rlab power` plans units and
    seeds for them, and `rlab continue --dry-run` warns when the planned evals cannot (80% power at each
    family's alpha / m, the level the report quotes its MDEs at). In each endpoint's own units."""

    primary: PositiveFloat = 0.01
    """The primary endpoint (BPB, bits per byte): 0.01 is ~1% of a d20's BPB, the size of the non-PI
    differences context-extension papers report."""
    bpb: PositiveFloat = 0.01
    """Every other BPB endpoint (each length of BPB vs length, train and val BPB), bits per byte."""
    core: PositiveFloat = 0.02
    """CORE (centered accuracy): about 4x nanochat's run-to-run SD of 0.0052 (7 identical runs)."""
    passkey: PositiveFloat = 0.1
    """Passkey accuracy (a fraction): 10 points."""
    copy_gain: PositiveFloat = 0.1
    """Copy gain at one distance (nats/token)."""


class EvalSpec(StrictModel):
    """Which evals run and how big they are."""

    evals: Annotated[tuple[EvalName, ...], NonEmpty(8)] = Field(
        catalog.default_names(), description=_evals_description()
    )
    bpb_tokens: TokenCount = 262144
    """Tokens per split for train/val BPB."""
    target_len: Length | None = None
    """The continued-training length the default length grid is built around (its longest length is 2x this);
    null = the experiment's train.seq_len (rlab eval fills it in)."""
    lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """Context lengths in tokens for BPB-vs-length, passkey and the RULER-style tasks; null = the default grid:
    L0/2, L0, 2*L0, ... up to 2*target_len (L0 = the base's training length, target_len included)."""
    extra_lengths: tuple[EvalLength, ...] = Field((), max_length=MAX_LENGTHS)
    """Lengths added to `lengths` or to the default grid."""
    length_tokens: TokenCount = 65536
    """Scored tokens per length for BPB-vs-length (capped by the long-document set)."""
    length_block: Length | None = None
    """BPB-vs-length scoring block B: each window scores its last B targets (left context L-B..L-1),
    the same targets at every length; null = the shortest length // 2 (see rlab.evals.bpb_length.same_targets)."""
    ppl_protocol: PplProtocol = "same_targets"
    """BPB-vs-length protocol: same_targets (default: the same target tokens at every length, paired), sliding
    (the YaRN repository's sliding-window perplexity: window L, stride ppl_stride, BOS per window) or truncated
    (YaRN's --truncate: the first L-1 tokens of each document in one window). See rlab.evals.bpb_length.sliding."""
    ppl_stride: Length = 256
    """Stride of the sliding protocol (YaRN's --sliding-window, default 256)."""
    ppl_docs: Trials = 10
    """Documents the sliding/truncated protocols score (YaRN's --samples): the first this many of the
    long-document set with at least the longest length in tokens (YaRN's --dataset-min-tokens)."""
    core_bundle: Path | None = None
    """DCLM CORE bundle dir; null = <base_dir>/eval_bundle."""
    core_tasks: Annotated[tuple[CoreTaskPattern, ...], Field(max_length=10_000)] | None = None
    """CORE tasks to run, lm-eval style: labels of the bundle's core.yaml or globs (`arc_*`); null = all of them.
    A subset is reported as "CORE (k of N tasks)" and is not comparable with the full CORE (`rlab eval --tasks`)."""
    max_per_task: PositiveInt | None = None
    """Evaluate at most N examples per CORE task (deterministic subsample); null = all."""
    passkey_lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """Passkey prompt lengths in tokens; null = the eval lengths."""
    passkey_depths: Annotated[tuple[float, ...], NonEmpty()] = (0.0, 0.25, 0.5, 0.75)
    """Where the needle sits: the fraction of the filler before it (at most 0.9, so the key is never next to
    the question)."""
    passkey_trials: Trials = 20
    """Trials per (length, depth), each with its own random key in 1..50000 (YaRN's range)."""
    ruler_tasks: Annotated[tuple[RulerTaskName, ...], NonEmpty()] = (
        "niah_multikey",
        "niah_multivalue",
        "vt",
        "cwe",
    )
    """RULER-style tasks (Hsieh et al. 2024): multi-key and multi-value needles, variable tracking,
    common-word extraction. See rlab.evals.ruler.tasks."""
    ruler_lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """Total lengths (prompt + answer) of the RULER-style tasks; null = the eval lengths."""
    ruler_trials: Trials = 20
    """Independently generated examples per (task, length)."""
    retrieval_choices: Annotated[int, InRange(0, MAX_CHOICES)] = 10
    """Passkey and RULER-style items are also scored by likelihood, beside generation: the right value against
    retrieval_choices - 1 distractors of the same form (mean log-probability per token, CORE's multiple-choice
    rule; chance = 1 / retrieval_choices). 0 = generation scores only. See rlab.evals.retrieval.likelihood."""
    dynamic_ntk: Literal["per_window", "fixed"] = "per_window"
    """How dynamic-ntk's scale is chosen: per_window (Hugging Face's behaviour: frequencies from each forward's
    own length, so context and frequencies change together along the length axis) or fixed (frequencies
    evaluated once at dynamic_ntk_len for every window)."""
    dynamic_ntk_len: Length | None = None
    """Length at which a fixed dynamic-ntk evaluates its frequencies; null = target_len."""
    copy_lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """copy_distance windows in tokens (the copy's distance grows with the window); null = the BPB-vs-length lengths."""
    copy_trials: Trials = 32
    """copy_distance records per window (the independent units of its intervals)."""
    attention_windows: AttentionWindows = "extend"
    """Sliding-window models (nanochat-2026) at lengths beyond their sequence_len: extend (default: the
    full-context layers, whose window is the training length, attend across the whole input, so a longer
    eval length means more context; short windows stay as trained), scale (every window as nanochat would
    size it for a model of that length) or capped (windows as trained, nanochat's behaviour: the model then
    sees at most sequence_len tokens back, and the report marks those lengths as capped). No effect on
    models without windows. See rlab.core.architecture.eval_window_sizes."""
    target_mde: TargetMde = TargetMde()
    """Effect sizes the evals should be able to detect (`rlab power`, the power line of `rlab continue --dry-run`);
    planning only: no eval reads it."""
    device_batch_size: DeviceBatch = 8
    """Sequences per forward pass."""
    seed: int = Field(1234)
    """Seed for subsampling, few-shot draws, passkeys and the RULER-style examples."""

    @field_validator("core_tasks")
    @classmethod
    def _some_tasks(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("name at least one task, or leave it null for all of them")
        return value

    @field_validator("retrieval_choices")
    @classmethod
    def _two_or_more(cls, value: int) -> int:
        if value == 1:
            raise ValueError("1 choice has nothing to beat; use 2 or more, or 0 for none")
        return value

    @field_validator("passkey_depths")
    @classmethod
    def _depths(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        for d in value:
            if not 0.0 <= d <= PASSKEY_MAX_DEPTH:
                raise ValueError(
                    f"each depth must be within [0, {PASSKEY_MAX_DEPTH}] (got {d}): deeper puts the "
                    "key next to the question"
                )
        if not value:
            raise ValueError("at least one depth")
        return value
