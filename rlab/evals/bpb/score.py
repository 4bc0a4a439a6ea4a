"""Bits per byte on the train/val splits, and the BPB machinery the by-length evals share.

BPB = sum of nats over target tokens / (ln 2 * sum of the UTF-8 bytes of those targets).
Dividing by bytes rather than tokens makes models with different tokenizers comparable, and
it is nanochat's definition, so its numbers are what users compare against. Targets that are
special tokens (0 bytes in `token_bytes`) or ignored (-1) count neither nats nor bytes.

Train/val BPB (`score_documents`) score a fixed set of whole documents (`rlab.evals.bpb.doc_set`: chosen
before anything is split across ranks, recorded by id and text hash). A document of n tokens (BOS
first) has n - 1 targets, scored in consecutive windows of at most W targets (W = the model's training
length): window c feeds tokens [cW, cW + W) and scores the next token of each, so a target's context is
the document since its window began (nanochat's packing also cuts context at row starts). Every window
is its own row: rows of a batch are right-padded and never see each other (causal attention; padded
targets are ignored), and length-dependent RoPE variants are evaluated at W for every row, so a
document's nats and bytes do not depend on world size, batch size or which rows share a batch. Ranks
take documents i = rank (mod world size); per-document sums are all-reduced (each document's row is
non-zero on one rank only, so the sum is exact) and totals are summed in document order: the result is
the same at any world size up to float rounding inside the forward (tested at 1e-6 relative in fp32).
One unit per document goes to bpb_units.csv for the report's bootstrap.

BPB vs context length lives in `rlab.evals.bpb_length.same_targets` (same targets at every length) and
`rlab.evals.bpb_length.sliding` (YaRN's sliding-window perplexity).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from rlab.evals.progress import ProgressFn, report
from rlab.evals.ranks import all_reduce_sum, rank_and_world

log = logging.getLogger(__name__)

LN2 = math.log(2.0)
_HEAD_ROWS = 2048  # positions per lm_head chunk: bounds the (rows, vocab) fp32 logits


def reduce_units(units, docs: int = 0, unit_docs: list[int] | None = None) -> BpbResult:
    """Sum per-unit (nats, bytes, tokens) rows across ranks into a `BpbResult` that keeps the units."""
    all_reduce_sum(units)
    rows = units.tolist()
    return BpbResult(
        nats=math.fsum(r[0] for r in rows),
        bytes=sum(r[1] for r in rows),
        tokens=int(sum(r[2] for r in rows)),
        units=[(r[0], r[1], int(r[2])) for r in rows],
        docs=docs,
        unit_docs=list(unit_docs) if unit_docs is not None else [],
    )


@dataclass
class BpbResult:
    """Totals and per-unit sums of one BPB measurement (intervals are the report's, from the units)."""

    nats: float
    bytes: float
    tokens: int
    units: list[tuple[float, float, int]] = field(default_factory=list)
    """(nats, bytes, tokens) per unit, in a fixed order."""
    docs: int = 0
    unit_docs: list = field(default_factory=list)
    """The document of each unit (same order as `units`)."""
    target_nats: list[list[float]] = field(default_factory=list)
    """Per unit, each scored target's nats (BPB vs length's blocks, when asked for: key-token BPB)."""

    @property
    def bpb(self) -> float:
        return self.nats / (LN2 * self.bytes) if self.bytes > 0 else float("nan")


# ----------------------------------------------------------------------------- whole documents


def doc_windows(n_tokens: int, window: int) -> list[tuple[int, int]]:
    """(start, stop) token slices of one document's windows: inputs tokens[start:stop-1], targets
    tokens[start+1:stop]; at most `window` targets each, every target exactly once."""
    return [(s, min(s + window + 1, n_tokens)) for s in range(0, n_tokens - 1, window)]


def window_nats(model, inputs: torch.Tensor, targets: torch.Tensor, token_bytes: torch.Tensor, freq_len: int):
    """Per-row (nats, bytes, counted tokens) of right-padded rows: inputs/targets (R, T), -1 = ignore.

    Runs the trunk once (`hidden_states`, length-dependent RoPE at `freq_len`) and the lm_head only at
    counted positions, in chunks. Returns three (R,) float64 tensors.
    """

    R = targets.shape[0]
    with torch.no_grad():
        nbytes = torch.where(targets >= 0, token_bytes[targets.clamp(min=0)], 0)  # (R, T), 0 = not counted
        counted = nbytes > 0
        hidden = model.hidden_states(inputs, freq_len=freq_len)  # (R, T, C)
        rows, cols = counted.nonzero(as_tuple=True)  # (N,) each
        losses = torch.empty(rows.numel(), dtype=torch.float32, device=targets.device)
        for i in range(0, rows.numel(), _HEAD_ROWS):
            r, c = rows[i : i + _HEAD_ROWS], cols[i : i + _HEAD_ROWS]
            logits = model.logits_at(hidden[r, c])  # (n, V) fp32
            losses[i : i + r.numel()] = F.cross_entropy(logits.float(), targets[r, c], reduction="none")
        nats = torch.zeros(R, dtype=torch.float64, device=targets.device).index_add_(0, rows, losses.double())
    return nats, nbytes.double().sum(dim=1), counted.double().sum(dim=1)


def score_documents(
    model,
    docs: Sequence[Sequence[int]],
    window: int,
    token_bytes: torch.Tensor,
    batch_tokens: int,
    progress: ProgressFn | None = None,
) -> BpbResult:
    """BPB over whole documents (token lists with BOS first); one unit per document, in `docs` order.

    Ranks take documents i = rank (mod world size); see the module docstring for why the result does not
    depend on the world size or on `batch_tokens` (positions per forward).
    """
    rank, world = rank_and_world()
    device = token_bytes.device
    rows = [(d, s, e) for d in range(rank, len(docs), world) for s, e in doc_windows(len(docs[d]), window)]
    rows.sort(key=lambda r: -(r[2] - r[1]))  # longest first: little padding; stable, so ties keep doc order
    row_sums = np.zeros((len(rows), 3), dtype=np.float64)
    i = 0
    report(progress, 0, len(rows))
    while i < len(rows):
        width = rows[i][2] - rows[i][1] - 1  # inputs of the longest row of this batch
        take = rows[i : i + max(1, batch_tokens // width)]
        x = torch.zeros((len(take), width), dtype=torch.long)  # (b, width); padding id 0 is never scored
        y = torch.full((len(take), width), -1, dtype=torch.long)  # (b, width)
        for j, (d, s, e) in enumerate(take):
            toks = torch.as_tensor(docs[d][s:e], dtype=torch.long)
            x[j, : e - s - 1], y[j, : e - s - 1] = toks[:-1], toks[1:]
        nats, nbytes, ntok = window_nats(model, x.to(device), y.to(device), token_bytes, freq_len=window)
        row_sums[i : i + len(take)] = torch.stack([nats, nbytes, ntok], dim=1).cpu().numpy()
        i += len(take)
        report(progress, i, len(rows))
    per_doc = np.zeros((len(docs), 3), dtype=np.float64)
    for k in sorted(
        range(len(rows)), key=lambda k: (rows[k][0], rows[k][1])
    ):  # a document's windows in order
        per_doc[rows[k][0]] += row_sums[k]
    return reduce_units(
        torch.from_numpy(per_doc).to(device), docs=len(docs), unit_docs=list(range(len(docs)))
    )
