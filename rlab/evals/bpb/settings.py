"""Train/val BPB's own settings (`eval.bpb_tokens`)."""

from __future__ import annotations

from rlab.evals.settings import EvalSettings
from rlab.spec.bounds import TokenCount


class BpbSettings(EvalSettings):
    """How much train/val BPB scores."""

    bpb_tokens: TokenCount = 262144
    """Tokens per split for train/val BPB."""
