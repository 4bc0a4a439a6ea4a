"""Bits per byte: on the train/val splits, and as a function of context length.

BPB = sum of nats over target tokens / (ln 2 * sum of the UTF-8 bytes of those targets).
Dividing by bytes rather than tokens makes models with different tokenizers comparable, and
it is nanochat's definition, so its numbers are what users compare against. Targets that are
special tokens (0 bytes in `token_bytes`) or ignored (-1) count neither nats nor bytes.
Under torch.distributed each rank scores its own units and the per-unit sums are all-reduced,
so every rank ends with the same totals.

BPB vs context length (the headline of a RoPE experiment: plain rope degrades past its
training length, extension variants should not) uses a sliding window over each long
document, see `sliding_windows`: window L, stride S = L/2; the first window of a document
scores all its targets, each later window only the targets the previous one did not reach,
so every target is scored exactly once and every target after the first window sees at least
L - S tokens of left context. Only documents with at least L targets take part (the first
window is then full), so a length is capped by what the documents allow.

Every eval reports per-unit (nats, bytes) so that the report can bootstrap paired differences
between variants: a unit is one eval batch (train/val; identical across variants because the
loader is deterministic) or one window (by length).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from rlab.evals.stats import ratio_ci

log = logging.getLogger(__name__)

LN2 = math.log(2.0)


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


@dataclass
class BpbResult:
    """Totals and per-unit sums of one BPB measurement."""

    nats: float
    bytes: float
    tokens: int
    units: list[tuple[float, float]] = field(default_factory=list)
    """(nats, bytes) per unit, in a fixed order."""
    docs: int = 0

    @property
    def bpb(self) -> float:
        return self.nats / (LN2 * self.bytes) if self.bytes > 0 else float("nan")

    def ci(self) -> tuple[float, float]:
        _, lo, hi = ratio_ci([u[0] for u in self.units], [u[1] for u in self.units])
        return lo / LN2, hi / LN2

    def summary(self) -> dict:
        lo, hi = self.ci()
        return {"bpb": self.bpb, "ci_low": lo, "ci_high": hi, "tokens": self.tokens}


def score_tokens(model, inputs: torch.Tensor, targets: torch.Tensor, token_bytes: torch.Tensor):
    """Per-row (nats, bytes, counted tokens) of one batch: inputs/targets (B, T), -1 = ignore.

    Returns three (B,) float64 tensors on the model's device.
    """
    B, T = targets.shape
    with torch.no_grad():
        losses = model(inputs, targets, loss_reduction="none").view(B, T).double()  # (B, T), 0 where ignored
    valid = targets >= 0  # (B, T)
    nbytes = torch.where(valid, token_bytes[targets.clamp(min=0)], 0)  # (B, T) long, 0 = special/ignored
    counted = nbytes > 0
    nats = torch.where(counted, losses, 0.0).sum(dim=1)  # (B,)
    return nats, nbytes.double().sum(dim=1), counted.double().sum(dim=1)


def evaluate_bpb(model, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], steps: int, token_bytes) -> BpbResult:
    """BPB over `steps` batches of (inputs, targets), each (B, T); one unit per step.

    Each rank passes its own batches; per-step sums are added across ranks, so unit i is the
    i-th global batch.
    """
    it: Iterator = iter(batches)
    device = token_bytes.device
    units = torch.zeros(steps, 3, dtype=torch.float64, device=device)  # (steps, [nats, bytes, tokens])
    for step in range(steps):
        x, y = next(it)
        nats, nbytes, ntok = score_tokens(model, x, y, token_bytes)
        units[step, 0], units[step, 1], units[step, 2] = nats.sum(), nbytes.sum(), ntok.sum()
    _all_reduce_sum(units)
    rows = units.tolist()
    return BpbResult(
        nats=sum(r[0] for r in rows),
        bytes=sum(r[1] for r in rows),
        tokens=int(sum(r[2] for r in rows)),
        units=[(r[0], r[1]) for r in rows],
    )


# ----------------------------------------------------------------------------- by length


@dataclass(frozen=True)
class Window:
    """Inputs are tokens[begin:end] of a document; targets are tokens[begin+1:end+1];
    input positions [score_from, end) are scored (position p predicts token p+1)."""

    doc: int
    begin: int
    end: int
    score_from: int


def sliding_windows(n_tokens: int, length: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, score_from) of every window over a document of `n_tokens` tokens.

    There are n_tokens - 1 predictions (positions 0 .. n_tokens-2). Window k starts at k*stride
    and ends at min(k*stride + length, n_tokens - 1); it scores positions from the previous
    window's end, so each position is scored exactly once.
    """
    if not 0 < stride <= length:
        raise ValueError(f"stride must be in 1..length (got stride {stride}, length {length})")
    last = n_tokens - 1
    out: list[tuple[int, int, int]] = []
    begin, prev_end = 0, 0
    while prev_end < last:
        end = min(begin + length, last)
        out.append((begin, end, prev_end))
        prev_end = end
        begin += stride
    return out


def convention(stride_fraction: float = 0.5) -> str:
    return (
        f"sliding window: window = L tokens, stride = {stride_fraction:g}*L; the first window of a document "
        "scores all its targets, each later window only its last stride targets (those the previous window "
        "did not reach), so every target is scored once with >= L - stride tokens of left context; only "
        "documents with >= L targets are used; one unit = one window"
    )


def resolve_lengths(train_seq_len: int, multipliers: Sequence[float], lengths: Sequence[int] | None) -> list[int]:
    """Explicit `lengths`, or multiples of the training length (rounded, deduplicated, sorted)."""
    if lengths:
        return sorted(set(int(n) for n in lengths))
    return sorted({max(2, int(round(m * train_seq_len))) for m in multipliers})


def plan_windows(
    doc_lengths: Sequence[int], length: int, token_budget: int, stride: int | None = None
) -> list[Window]:
    """Windows for one length: documents in order (only those with >= length targets), until
    `token_budget` targets are scored (the window that crosses the budget is kept whole)."""
    stride = stride or max(1, length // 2)
    windows: list[Window] = []
    scored = 0
    for d, n in enumerate(doc_lengths):
        if n - 1 < length:
            continue
        for begin, end, score_from in sliding_windows(n, length, stride):
            windows.append(Window(d, begin, end, score_from))
            scored += end - score_from
            if scored >= token_budget:
                return windows
    return windows


def evaluate_bpb_windows(
    model,
    docs: Sequence[Sequence[int]],
    windows: Sequence[Window],
    length: int,
    token_bytes: torch.Tensor,
    pad_id: int,
    batch_tokens: int,
) -> BpbResult:
    """BPB over the given windows; one unit per window. Ranks take windows i = rank (mod world)."""
    rank, world = _world()
    device = token_bytes.device
    units = torch.zeros(len(windows), 3, dtype=torch.float64, device=device)  # (W, [nats, bytes, tokens])
    mine = list(range(rank, len(windows), world))
    per_batch = max(1, batch_tokens // length)
    for i in range(0, len(mine), per_batch):
        idxs = mine[i : i + per_batch]
        x = torch.full((len(idxs), length), pad_id, dtype=torch.long)  # (b, L)
        y = torch.full((len(idxs), length), -1, dtype=torch.long)  # (b, L): -1 = not scored
        for row, w_i in enumerate(idxs):
            w = windows[w_i]
            toks = docs[w.doc]
            span = w.end - w.begin
            x[row, :span] = torch.as_tensor(toks[w.begin : w.end], dtype=torch.long)
            s = w.score_from - w.begin
            y[row, s:span] = torch.as_tensor(toks[w.score_from + 1 : w.end + 1], dtype=torch.long)
        nats, nbytes, ntok = score_tokens(model, x.to(device), y.to(device), token_bytes)
        for row, w_i in enumerate(idxs):
            units[w_i, 0], units[w_i, 1], units[w_i, 2] = nats[row], nbytes[row], ntok[row]
    _all_reduce_sum(units)
    rows = units.tolist()
    return BpbResult(
        nats=sum(r[0] for r in rows),
        bytes=sum(r[1] for r in rows),
        tokens=int(sum(r[2] for r in rows)),
        units=[(r[0], r[1]) for r in rows],
        docs=len({w.doc for w in windows}),
    )


def evaluate_bpb_by_length(
    model,
    docs: Sequence[Sequence[int]],
    lengths: Sequence[int],
    token_budget: int,
    token_bytes: torch.Tensor,
    pad_id: int,
    batch_tokens: int,
) -> tuple[dict, dict[int, BpbResult]]:
    """The `bpb_length` metric (convention, per-length rows, skipped lengths) and raw results."""
    doc_lengths = [len(d) for d in docs]
    longest = max(doc_lengths, default=0) - 1
    rows, skipped, raw = [], [], {}
    for length in lengths:
        windows = plan_windows(doc_lengths, length, token_budget)
        if not windows:
            reason = f"no document has {length} targets (longest has {longest})"
            log.warning("BPB at length %d skipped: %s", length, reason)
            skipped.append({"length": length, "reason": reason})
            continue
        res = evaluate_bpb_windows(model, docs, windows, length, token_bytes, pad_id, batch_tokens)
        raw[length] = res
        lo, hi = res.ci()
        rows.append({"length": length, "bpb": res.bpb, "ci_low": lo, "ci_high": hi, "tokens": res.tokens, "docs": res.docs})
        log.info("BPB at length %d: %.4f [%.4f, %.4f] over %d tokens, %d docs", length, res.bpb, lo, hi, res.tokens, res.docs)
    return {"convention": convention(), "lengths": rows, "skipped": skipped}, raw
