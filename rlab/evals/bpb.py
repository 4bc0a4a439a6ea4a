"""Bits per byte: on the train/val splits, and as a function of context length.

BPB = sum of nats over target tokens / (ln 2 * sum of the UTF-8 bytes of those targets).
Dividing by bytes rather than tokens makes models with different tokenizers comparable, and
it is nanochat's definition, so its numbers are what users compare against. Targets that are
special tokens (0 bytes in `token_bytes`) or ignored (-1) count neither nats nor bytes.
Under torch.distributed each rank scores its own units and the per-unit sums are all-reduced,
so every rank ends with the same totals.

BPB vs context length (the headline of a RoPE experiment: plain rope degrades past its
training length, extension variants should not) is measured so that every scored token sits
deep in its window, see `plan_windows`. At length L the window is L tokens and the stride is
S = L // 2. Within a document windows start at 0, S, 2S, ... and are always full: window k
takes tokens [kS, kS + L) as inputs and tokens [kS + 1, kS + L] as targets, and scores only
its last S targets, i.e. input positions j = L - S .. L - 1. Every scored token is thus
predicted from between L - S (= L/2 for even L) and L - 1 tokens of left context, so the
curve at L measures positions L/2 .. L - 1 rather than a mix dominated by short contexts.
Consecutive windows score adjacent blocks, so each target is scored at most once. Not scored
at length L: the first L - S targets of each document (they cannot have L/2 left context) and
a tail of fewer than S targets after the last full window. A document is usable at length L
only with at least L + 1 tokens; shorter ones are skipped (logged, counted in `short_docs`).
The token budget (`EvalSpec.length_tokens`) is spread over all usable documents round-robin,
window by window (window 0 of every document in document order, then window 1, ...), until
the budget is reached, so the estimate and its interval are not one document's. The plan
depends only on the document lengths, L and the budget, so window i is the same text for
every variant: one unit = one window, and unit ids pair across variants.

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


def stride_for(length: int) -> int:
    """The stride at window length L: L // 2 (so L - stride >= L/2 tokens of left context)."""
    if length < 2:
        raise ValueError(f"BPB-vs-length needs a window of at least 2 tokens (got {length})")
    return length // 2


def sliding_windows(n_tokens: int, length: int, stride: int | None = None) -> list[tuple[int, int, int]]:
    """(begin, end, score_from) of every full window over a document of `n_tokens` tokens.

    Window k has inputs [k*stride, k*stride + length) and needs the target after its last
    input, so it exists while k*stride + length + 1 <= n_tokens; it scores its last `stride`
    input positions [end - stride, end). Empty when n_tokens < length + 1.
    """
    stride = stride or stride_for(length)
    if not 0 < stride <= length:
        raise ValueError(f"stride must be in 1..length (got stride {stride}, length {length})")
    return [(b, b + length, b + length - stride) for b in range(0, n_tokens - length, stride)]


def convention() -> str:
    return (
        "sliding window: window = L tokens, stride S = L//2; windows start at 0, S, 2S, ... within each "
        "document and are always full; each window scores only its last S targets (input positions "
        "L-S..L-1), so every scored token has between L-S (=L/2) and L-1 tokens of left context and is "
        "scored once; the first L-S targets of each document (and a tail of < S targets) are not scored "
        "at length L; documents with fewer than L+1 tokens are skipped; the token budget is spread "
        "round-robin over all usable documents, window by window; one unit = one window"
    )


def resolve_lengths(train_seq_len: int, multipliers: Sequence[float], lengths: Sequence[int] | None) -> list[int]:
    """Explicit `lengths`, or multiples of the training length (rounded, deduplicated, sorted)."""
    if lengths:
        return sorted(set(int(n) for n in lengths))
    return sorted({max(2, int(round(m * train_seq_len))) for m in multipliers})


@dataclass
class LengthPlan:
    """The windows scored at one length, and which documents were too short for it."""

    length: int
    stride: int
    windows: list[Window]
    usable_docs: int
    short_docs: list[int]
    """Indices of documents with fewer than length + 1 tokens (not used at this length)."""
    budget_met: bool

    @property
    def docs(self) -> int:
        """Documents that contribute at least one window."""
        return len({w.doc for w in self.windows})

    @property
    def scored_positions(self) -> int:
        return sum(w.end - w.score_from for w in self.windows)


def plan_windows(doc_lengths: Sequence[int], length: int, token_budget: int) -> LengthPlan:
    """Windows for one length: round-robin over the usable documents, window by window.

    Round r takes window r of every usable document that has one, in document order; planning
    stops as soon as `token_budget` positions are scored (so the budget is met with less than
    one stride to spare) or every window of every usable document is taken.
    """
    stride = stride_for(length)
    per_doc = {d: sliding_windows(n, length, stride) for d, n in enumerate(doc_lengths) if n >= length + 1}
    short = [d for d, n in enumerate(doc_lengths) if n < length + 1]
    windows: list[Window] = []
    scored = 0
    rounds = max((len(w) for w in per_doc.values()), default=0)
    for r in range(rounds):
        for d, wins in per_doc.items():
            if r < len(wins):
                windows.append(Window(d, *wins[r]))
                scored += stride
                if scored >= token_budget:
                    return LengthPlan(length, stride, windows, len(per_doc), short, True)
    return LengthPlan(length, stride, windows, len(per_doc), short, False)


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
    longest = max(doc_lengths, default=0)
    rows, skipped, raw = [], [], {}
    for length in lengths:
        plan = plan_windows(doc_lengths, length, token_budget)
        if plan.short_docs:
            log.info(
                "BPB at length %d: %d of %d documents skipped (fewer than %d tokens)",
                length, len(plan.short_docs), len(doc_lengths), length + 1,
            )
        if not plan.windows:
            reason = f"no document has the {length + 1} tokens a full window needs (longest has {longest})"
            log.warning("BPB at length %d skipped: %s", length, reason)
            skipped.append({"length": length, "reason": reason})
            continue
        if not plan.budget_met:
            log.warning(
                "BPB at length %d: the long documents allow only %d scored positions (budget %d)",
                length, plan.scored_positions, token_budget,
            )
        res = evaluate_bpb_windows(model, docs, plan.windows, length, token_bytes, pad_id, batch_tokens)
        raw[length] = res
        lo, hi = res.ci()
        rows.append({
            "length": length, "bpb": res.bpb, "ci_low": lo, "ci_high": hi, "tokens": res.tokens, "docs": res.docs,
            "stride": plan.stride, "windows": len(plan.windows), "short_docs": len(plan.short_docs),
        })
        log.info(
            "BPB at length %d: %.4f [%.4f, %.4f] over %d tokens, %d windows, %d docs",
            length, res.bpb, lo, hi, res.tokens, len(plan.windows), res.docs,
        )
    return {"convention": convention(), "lengths": rows, "skipped": skipped}, raw
