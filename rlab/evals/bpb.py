"""Bits per byte: on the train/val splits, and as a function of context length.

BPB = sum of nats over target tokens / (ln 2 * sum of the UTF-8 bytes of those targets).
Dividing by bytes rather than tokens makes models with different tokenizers comparable, and
it is nanochat's definition, so its numbers are what users compare against. Targets that are
special tokens (0 bytes in `token_bytes`) or ignored (-1) count neither nats nor bytes.

Train/val BPB (`score_documents`) score a fixed set of whole documents (`rlab.evals.doc_set`: chosen
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

BPB vs context length (the headline of a RoPE experiment: plain rope degrades past its
training length, extension variants should not) scores the SAME target tokens at every
length, each with (almost) the full window of left context, so that the curve's shape shows
the effect of context alone and not a change of text (`plan_blocks`):

- Lengths L_1 < ... < L_k; B = the scoring block (`EvalSpec.length_block`, else L_1 // 2,
  at least 1; B <= L_1). A length L is feasible iff some document has at least L + 1 tokens
  (L inputs and the target after the last one); infeasible lengths are skipped with a reason,
  and L_k below is the longest feasible length.
- A block is B consecutive target tokens of one document. It is placed by its window end e:
  at every length L the block is scored by one forward over the input tokens [e - L, e),
  whose targets are tokens [e - L + 1, e]; only the last B targets, tokens [e - B + 1, e],
  are scored (input positions L - B .. L - 1 of the window). A block is usable iff e >= L_k
  (the longest window fits) and e <= n - 1 (its last target is in the document of n tokens).
- Within a document the blocks tile the tail without overlap or gaps: e = L_k, L_k + B,
  L_k + 2B, ... (a stride of B), i.e. targets L_k - B + 1 .. ; the head before that and a
  tail of fewer than B tokens are not scored. Documents with fewer than L_k + 1 tokens are
  not used. Blocks are taken round-robin over the usable documents (block 0 of every document
  in document order, then block 1, ...) until `EvalSpec.length_tokens` targets are planned.

So every length scores exactly the same target tokens, each exactly once, each predicted from
between L - B and L - 1 tokens of left context. The plan depends only on the document lengths,
the feasible lengths, B and the budget: block i is the same text at every length and for every
variant, so one unit = one block (unit id = its index in the plan) pairs across both, and its
document is recorded for resampling by document.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from rlab.core.bpb import score_tokens

log = logging.getLogger(__name__)

LN2 = math.log(2.0)
_HEAD_ROWS = 2048  # positions per lm_head chunk: bounds the (rows, vocab) fp32 logits


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


def _reduce_units(units, docs: int = 0, unit_docs: list[int] | None = None) -> BpbResult:
    """Sum per-unit (nats, bytes, tokens) rows across ranks into a `BpbResult` that keeps the units."""
    _all_reduce_sum(units)
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
    import torch.nn.functional as F

    R = targets.shape[0]
    with torch.no_grad():
        nbytes = torch.where(targets >= 0, token_bytes[targets.clamp(min=0)], 0)  # (R, T), 0 = not counted
        counted = nbytes > 0
        hidden = model.hidden_states(inputs, freq_len=freq_len)  # (R, T, C)
        rows, cols = counted.nonzero(as_tuple=True)  # (N,) each
        losses = torch.empty(rows.numel(), dtype=torch.float32, device=targets.device)
        for i in range(0, rows.numel(), _HEAD_ROWS):
            r, c = rows[i:i + _HEAD_ROWS], cols[i:i + _HEAD_ROWS]
            logits = model.logits_at(hidden[r, c])  # (n, V) fp32
            losses[i:i + r.numel()] = F.cross_entropy(logits.float(), targets[r, c], reduction="none")
        nats = torch.zeros(R, dtype=torch.float64, device=targets.device).index_add_(0, rows, losses.double())
    return nats, nbytes.double().sum(dim=1), counted.double().sum(dim=1)


def score_documents(
    model, docs: Sequence[Sequence[int]], window: int, token_bytes: torch.Tensor, batch_tokens: int
) -> BpbResult:
    """BPB over whole documents (token lists with BOS first); one unit per document, in `docs` order.

    Ranks take documents i = rank (mod world size); see the module docstring for why the result does not
    depend on the world size or on `batch_tokens` (positions per forward).
    """
    rank, world = _world()
    device = token_bytes.device
    rows = [(d, s, e) for d in range(rank, len(docs), world) for s, e in doc_windows(len(docs[d]), window)]
    rows.sort(key=lambda r: -(r[2] - r[1]))  # longest first: little padding; stable, so ties keep doc order
    row_sums = np.zeros((len(rows), 3), dtype=np.float64)
    i = 0
    while i < len(rows):
        width = rows[i][2] - rows[i][1] - 1  # inputs of the longest row of this batch
        take = rows[i:i + max(1, batch_tokens // width)]
        x = torch.zeros((len(take), width), dtype=torch.long)  # (b, width); padding id 0 is never scored
        y = torch.full((len(take), width), -1, dtype=torch.long)  # (b, width)
        for j, (d, s, e) in enumerate(take):
            toks = torch.as_tensor(docs[d][s:e], dtype=torch.long)
            x[j, : e - s - 1], y[j, : e - s - 1] = toks[:-1], toks[1:]
        nats, nbytes, ntok = window_nats(model, x.to(device), y.to(device), token_bytes, freq_len=window)
        row_sums[i:i + len(take)] = torch.stack([nats, nbytes, ntok], dim=1).cpu().numpy()
        i += len(take)
    per_doc = np.zeros((len(docs), 3), dtype=np.float64)
    for k in sorted(range(len(rows)), key=lambda k: (rows[k][0], rows[k][1])):  # a document's windows in order
        per_doc[rows[k][0]] += row_sums[k]
    return _reduce_units(torch.from_numpy(per_doc).to(device), docs=len(docs), unit_docs=list(range(len(docs))))


# ----------------------------------------------------------------------------- by length


@dataclass(frozen=True)
class Block:
    """B target tokens of one document: tokens [end - B + 1, end] of `doc`.

    At length L it is scored by the window of inputs [end - L, end) (targets [end - L + 1, end]),
    of which only the last B targets count."""

    doc: int
    end: int


def default_block(lengths: Sequence[int]) -> int:
    """B = the shortest length // 2, at least 1."""
    return max(1, min(lengths) // 2)


def convention(block: int, longest: int) -> str:
    return (
        f"same targets at every length: targets are blocks of B = {block} consecutive tokens, placed where "
        f"the longest feasible window (L_k = {longest}) fits: block ends e = L_k, L_k+B, L_k+2B, ... in each "
        "document with at least L_k+1 tokens (a stride of B, no overlap), taken round-robin over documents "
        "until the token budget; at every length L a block is scored by one forward over inputs [e-L, e) "
        "scoring only its last B targets (input positions L-B..L-1), so every length scores exactly the same "
        "target tokens, each once, with between L-B and L-1 tokens of left context; lengths no document "
        "allows are skipped; one unit = one block, unit ids equal across lengths and variants"
    )


def resolve_lengths(train_seq_len: int, multipliers: Sequence[float], lengths: Sequence[int] | None) -> list[int]:
    """Explicit `lengths`, or multiples of the training length (rounded, deduplicated, sorted)."""
    if lengths:
        return sorted(set(int(n) for n in lengths))
    return sorted({max(2, int(round(m * train_seq_len))) for m in multipliers})


@dataclass
class BlockPlan:
    """The blocks scored at every feasible length, and which lengths/documents were left out."""

    lengths: list[int]
    """Feasible lengths, ascending; the last is L_k, which places the blocks."""
    skipped: list[dict]
    """{"length", "reason"} per infeasible length."""
    block: int
    blocks: list[Block]
    usable_docs: int
    short_docs: list[int]
    """Indices of documents with fewer than L_k + 1 tokens (not used at any length)."""
    budget_met: bool

    @property
    def longest(self) -> int:
        return self.lengths[-1] if self.lengths else 0

    @property
    def docs(self) -> int:
        """Documents that contribute at least one block."""
        return len({b.doc for b in self.blocks})

    @property
    def scored_positions(self) -> int:
        return self.block * len(self.blocks)


def doc_block_ends(n_tokens: int, longest: int, block: int) -> list[int]:
    """Block ends e = longest, longest + block, ... <= n_tokens - 1 of one document (empty if too short)."""
    return list(range(longest, n_tokens, block))


def plan_blocks(
    doc_lengths: Sequence[int], lengths: Sequence[int], token_budget: int, block: int | None = None
) -> BlockPlan:
    """Feasible lengths and the blocks every one of them scores (see the module docstring).

    Round r takes block r of every usable document that has one, in document order; planning
    stops as soon as `token_budget` targets are planned (met with less than one block to spare)
    or every block of every usable document is taken.
    """
    from rlab.errors import EvalError

    lengths = sorted(set(int(n) for n in lengths))
    if not lengths:
        raise EvalError("BPB-vs-length needs at least one length", hint="set eval.lengths or eval.length_multipliers")
    B = block if block is not None else default_block(lengths)
    if not 1 <= B <= lengths[0]:
        raise EvalError(
            f"BPB-vs-length block of {B} tokens does not fit the shortest length {lengths[0]}",
            hint="set eval.length_block to at most the shortest length (default: shortest length // 2)",
        )
    longest_doc = max(doc_lengths, default=0)
    feasible = [L for L in lengths if L + 1 <= longest_doc]
    skipped = [
        {"length": L, "reason": f"no document has the {L + 1} tokens a full window needs (longest has {longest_doc})"}
        for L in lengths if L + 1 > longest_doc
    ]
    if not feasible:
        return BlockPlan([], skipped, B, [], 0, list(range(len(doc_lengths))), False)
    longest = feasible[-1]
    per_doc = {d: doc_block_ends(n, longest, B) for d, n in enumerate(doc_lengths) if n >= longest + 1}
    short = [d for d, n in enumerate(doc_lengths) if n < longest + 1]
    blocks: list[Block] = []
    rounds = max((len(e) for e in per_doc.values()), default=0)
    for r in range(rounds):
        for d, ends in per_doc.items():
            if r < len(ends):
                blocks.append(Block(d, ends[r]))
                if B * len(blocks) >= token_budget:
                    return BlockPlan(feasible, skipped, B, blocks, len(per_doc), short, True)
    return BlockPlan(feasible, skipped, B, blocks, len(per_doc), short, False)


def evaluate_bpb_blocks(
    model,
    docs: Sequence[Sequence[int]],
    blocks: Sequence[Block],
    length: int,
    block: int,
    token_bytes: torch.Tensor,
    batch_tokens: int,
) -> BpbResult:
    """BPB at one length over the given blocks; one unit per block. Ranks take blocks i = rank (mod world).

    Windows of one length all have `length` inputs, so up to batch_tokens // length of them
    share a forward with no padding.
    """
    rank, world = _world()
    device = token_bytes.device
    units = torch.zeros(len(blocks), 3, dtype=torch.float64, device=device)  # (N, [nats, bytes, tokens])
    mine = list(range(rank, len(blocks), world))
    per_batch = max(1, batch_tokens // length)
    for i in range(0, len(mine), per_batch):
        idxs = mine[i : i + per_batch]
        x = torch.empty((len(idxs), length), dtype=torch.long)  # (b, L)
        y = torch.full((len(idxs), length), -1, dtype=torch.long)  # (b, L): -1 = not scored
        for row, b_i in enumerate(idxs):
            bl = blocks[b_i]
            toks = docs[bl.doc]
            if bl.end - length < 0 or bl.end + 1 > len(toks):
                raise ValueError(f"block {b_i} (doc {bl.doc}, end {bl.end}) does not fit a window of {length}")
            x[row] = torch.as_tensor(toks[bl.end - length : bl.end], dtype=torch.long)
            y[row, length - block :] = torch.as_tensor(toks[bl.end - block + 1 : bl.end + 1], dtype=torch.long)
        nats, nbytes, ntok = score_tokens(model, x.to(device), y.to(device), token_bytes)
        for row, b_i in enumerate(idxs):
            units[b_i, 0], units[b_i, 1], units[b_i, 2] = nats[row], nbytes[row], ntok[row]
    return _reduce_units(units, docs=len({b.doc for b in blocks}), unit_docs=[b.doc for b in blocks])


def evaluate_bpb_by_length(
    model,
    docs: Sequence[Sequence[int]],
    lengths: Sequence[int],
    token_budget: int,
    token_bytes: torch.Tensor,
    pad_id: int,
    batch_tokens: int,
    block: int | None = None,
) -> tuple[dict, dict[int, BpbResult]]:
    """The `bpb_length` metric (convention, per-length rows, skipped lengths) and raw results.

    `pad_id` is unused (windows are always full) and kept for the caller's signature; `block`
    is B (None = shortest length // 2).
    """
    del pad_id
    plan = plan_blocks([len(d) for d in docs], lengths, token_budget, block)
    for s in plan.skipped:
        log.warning("BPB at length %d skipped: %s", s["length"], s["reason"])
    B = plan.block
    if plan.lengths:
        log.info(
            "BPB vs length: %d blocks of %d targets from %d docs, placed for L_k = %d (%d of %d documents too short)",
            len(plan.blocks), B, plan.docs, plan.longest, len(plan.short_docs), len(docs),
        )
        if not plan.budget_met:
            log.warning(
                "BPB vs length: the long documents allow only %d scored targets at length %d (budget %d)",
                plan.scored_positions, plan.longest, token_budget,
            )
    rows, raw = [], {}
    for length in plan.lengths:
        res = evaluate_bpb_blocks(model, docs, plan.blocks, length, B, token_bytes, batch_tokens)
        raw[length] = res
        rows.append({
            "length": length, "bpb": res.bpb, "tokens": res.tokens, "docs": res.docs,
            "block": B, "blocks": len(plan.blocks), "context_min": length - B, "context_max": length - 1,
            "short_docs": len(plan.short_docs),
        })
        log.info("BPB at length %d: %.4f over %d tokens, %d blocks, %d docs",
                 length, res.bpb, res.tokens, len(plan.blocks), res.docs)
    metric = {
        "convention": convention(B, plan.longest), "block": B, "longest": plan.longest,
        "lengths": rows, "skipped": plan.skipped,
    }
    return metric, raw
