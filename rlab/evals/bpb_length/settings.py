"""BPB vs length's own settings: how many tokens it scores and under which protocol."""

from __future__ import annotations

from typing import ClassVar, Literal

from rlab.evals.settings import EvalSettings
from rlab.spec.bounds import Length, TokenCount, Trials

PplProtocol = Literal["same_targets", "sliding", "truncated"]


class BpbLengthSettings(EvalSettings):
    """How BPB vs length scores each length."""

    not_hashed: ClassVar[tuple[str, ...]] = ("length_target_losses",)

    length_tokens: TokenCount = 65536
    """Scored tokens per length for BPB-vs-length (capped by the long-document set)."""
    length_block: Length | None = None
    """BPB-vs-length scoring block B: each window scores its last B targets (left context L-B..L-1),
    the same targets at every length; null = the shortest length // 2 (see rlab.evals.bpb_length.same_targets)."""
    length_target_losses: bool = True
    """Write every scored target's loss at every length (bpb_targets.csv: length_tokens x lengths rows, ~30 bytes
    each) for the report's key-token BPB; same_targets protocol only."""
    ppl_protocol: PplProtocol = "same_targets"
    """BPB-vs-length protocol: same_targets (default: the same target tokens at every length, paired), sliding
    (the YaRN repository's sliding-window perplexity: window L, stride ppl_stride, BOS per window) or truncated
    (YaRN's --truncate: the first L-1 tokens of each document in one window). See rlab.evals.bpb_length.sliding."""
    ppl_stride: Length = 256
    """Stride of the sliding protocol (YaRN's --sliding-window, default 256)."""
    ppl_docs: Trials = 10
    """Documents the sliding/truncated protocols score (YaRN's --samples): the first this many of the
    long-document set with at least the longest length in tokens (YaRN's --dataset-min-tokens)."""
