"""BPB vs context length, same-targets protocol (rlab's default): the curve that tells RoPE variants apart.

Plain rope degrades past its training length, extension variants should not. This protocol scores
the SAME target tokens at every length, each with (almost) the full window of left context, so that
the curve's shape shows the effect of context alone and not a change of text (`plan_blocks`):

- Lengths L_1 < ... < L_k; B = the scoring block (`eval.length_block`, else L_1 // 2,
  at least 1; B <= L_1). A length L is feasible iff some document has at least L + 1 tokens
  (L inputs and the target after the last one; documents start with BOS); infeasible lengths are
  skipped with a reason, and L_k below is the longest feasible length.
- A block is B consecutive target tokens of one document. It is placed by its window end e:
  at every length L the block is scored by one forward over the input tokens [e - L, e),
  whose targets are tokens [e - L + 1, e]; only the last B targets, tokens [e - B + 1, e],
  are scored (input positions L - B .. L - 1 of the window). A block is usable iff e >= L_k
  (the longest window fits) and e <= n - 1 (its last target is in the document of n tokens).
- Within a document the blocks tile the tail without overlap or gaps from e_0 = 2 L_k: e = e_0,
  e_0 + B, ... (a stride of B); the head before that and a tail of fewer than B tokens are not
  scored. Starting at 2 L_k keeps the document start out of every window: the longest window
  begins L_k tokens in, so no length sees the BOS or the document's opening (had the first block
  ended at L_k, the longest window would start at the BOS and the shorter ones never would, and
  "more context" would be confounded with "the document start in view"). Documents with fewer
  than 2 L_k + 1 tokens are not used; when none has that many, e_0 = L_k + 1 (no window sees the
  BOS, the longest still sees the opening; `start` in eval.json says which). Blocks are taken
  round-robin over the usable documents (block 0 of every document in document order, then
  block 1, ...) until `eval.length_tokens` targets are planned.

So every length scores exactly the same target tokens, each exactly once, each predicted from
between L - B and L - 1 tokens of left context. The plan depends only on the document lengths,
the feasible lengths, B and the budget: block i is the same text at every length and for every
variant, so one unit = one block (unit id = its index in the plan), paired across both; each
unit also names its document (the cluster a bootstrap resamples: blocks of one document share
its topic and style). The documents are the base dir's long-document set (`rlab.data.long_docs`).

Numbers from this protocol are not comparable with published sliding-window perplexities (YaRN,
LongLoRA tables): for those use `eval.ppl_protocol: sliding` (`rlab.evals.bpb_length.sliding`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from rlab.core.bpb import token_losses
from rlab.errors import EvalError
from rlab.evals.bpb.score import BpbResult, reduce_units
from rlab.evals.progress import ProgressFn, report, stages
from rlab.evals.ranks import all_reduce_sum, rank_and_world

log = logging.getLogger(__name__)


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
        f"the longest feasible window (L_k = {longest}) starts past the document start: block ends e = 2L_k, "
        "2L_k+B, ... in each document with at least 2L_k+1 tokens (else from L_k+1: no window sees the BOS), "
        "a stride of B, no overlap, taken round-robin over documents "
        "until the token budget; at every length L a block is scored by one forward over inputs [e-L, e) "
        "scoring only its last B targets (input positions L-B..L-1), so every length scores exactly the same "
        "target tokens, each once, with between L-B and L-1 tokens of left context; lengths no document "
        "allows are skipped; one unit = one block (clustered by document), unit ids equal across lengths and "
        "variants"
    )


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
    def start(self) -> int:
        """The first block's end e_0 (the earliest scored target; see `first_end`)."""
        return min((b.end for b in self.blocks), default=0)

    @property
    def docs(self) -> int:
        """Documents that contribute at least one block."""
        return len({b.doc for b in self.blocks})

    @property
    def used_docs(self) -> list[int]:
        return sorted({b.doc for b in self.blocks})

    @property
    def scored_positions(self) -> int:
        return self.block * len(self.blocks)


def first_end(doc_lengths: Sequence[int], longest: int) -> int:
    """e_0: 2 L_k where some document is long enough (no window sees the document start), else L_k + 1 (no
    window sees the BOS)."""
    return 2 * longest if max(doc_lengths, default=0) >= 2 * longest + 1 else longest + 1


def doc_block_ends(n_tokens: int, start: int, block: int) -> list[int]:
    """Block ends e = start, start + block, ... <= n_tokens - 1 of one document (empty if too short)."""
    return list(range(start, n_tokens, block))


def plan_blocks(
    doc_lengths: Sequence[int], lengths: Sequence[int], token_budget: int, block: int | None = None
) -> BlockPlan:
    """Feasible lengths and the blocks every one of them scores (see the module docstring).

    Round r takes block r of every usable document that has one, in document order; planning
    stops as soon as `token_budget` targets are planned (met with less than one block to spare)
    or every block of every usable document is taken.
    """

    lengths = sorted(set(int(n) for n in lengths))
    if not lengths:
        raise EvalError("BPB-vs-length needs at least one length", hint="set eval.lengths or eval.target_len")
    B = block if block is not None else default_block(lengths)
    if not 1 <= B <= lengths[0]:
        raise EvalError(
            f"BPB-vs-length block of {B} tokens does not fit the shortest length {lengths[0]}",
            hint="set eval.length_block to at most the shortest length (default: shortest length // 2)",
        )
    longest_doc = max(doc_lengths, default=0)
    feasible = [L for L in lengths if L + 1 <= longest_doc]
    skipped = [
        {
            "length": L,
            "reason": f"no document has the {L + 1} tokens a full window needs (longest has {longest_doc})",
        }
        for L in lengths
        if L + 1 > longest_doc
    ]
    if not feasible:
        return BlockPlan([], skipped, B, [], 0, list(range(len(doc_lengths))), False)
    longest = feasible[-1]
    start = first_end(doc_lengths, longest)
    per_doc = {d: doc_block_ends(n, start, B) for d, n in enumerate(doc_lengths) if n >= start + 1}
    short = [d for d, n in enumerate(doc_lengths) if n < start + 1]
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
    docs: Mapping[int, Sequence[int]] | Sequence[Sequence[int]],
    blocks: Sequence[Block],
    length: int,
    block: int,
    token_bytes: torch.Tensor,
    batch_tokens: int,
    progress: ProgressFn | None = None,
    targets_out: torch.Tensor | None = None,
) -> BpbResult:
    """BPB at one length over the given blocks; one unit per block. Ranks take blocks i = rank (mod world).

    Windows of one length all have `length` inputs, so up to batch_tokens // length of them
    share a forward with no padding. `docs` maps a document index to its tokens (BOS first).
    `targets_out` (N blocks, B) float64, zeros, on the device: filled with each target's nats (key-token BPB).
    """
    rank, world = rank_and_world()
    device = token_bytes.device
    units = torch.zeros(len(blocks), 3, dtype=torch.float64, device=device)  # (N, [nats, bytes, tokens])
    mine = list(range(rank, len(blocks), world))
    per_batch = max(1, batch_tokens // length)
    report(progress, 0, len(mine))
    for i in range(0, len(mine), per_batch):
        idxs = mine[i : i + per_batch]
        x = torch.empty((len(idxs), length), dtype=torch.long)  # (b, L)
        y = torch.full((len(idxs), length), -1, dtype=torch.long)  # (b, L): -1 = not scored
        for row, b_i in enumerate(idxs):
            bl = blocks[b_i]
            toks = docs[bl.doc]
            if bl.end - length < 0 or bl.end + 1 > len(toks):
                raise ValueError(
                    f"block {b_i} (doc {bl.doc}, end {bl.end}) does not fit a window of {length}"
                )
            x[row] = torch.as_tensor(toks[bl.end - length : bl.end], dtype=torch.long)
            y[row, length - block :] = torch.as_tensor(
                toks[bl.end - block + 1 : bl.end + 1], dtype=torch.long
            )
        per_target, per_bytes = token_losses(model, x.to(device), y.to(device), token_bytes)  # (b, L) each
        nats, nbytes, ntok = per_target.sum(dim=1), per_bytes.sum(dim=1), (per_bytes > 0).double().sum(dim=1)
        for row, b_i in enumerate(idxs):
            units[b_i, 0], units[b_i, 1], units[b_i, 2] = nats[row], nbytes[row], ntok[row]
            if targets_out is not None:
                targets_out[b_i] = per_target[row, length - block :]
        report(progress, i + len(idxs), len(mine))
    if targets_out is not None:
        all_reduce_sum(targets_out)  # each block's row is non-zero on one rank only: the sum is exact
    return reduce_units(units, docs=len({b.doc for b in blocks}), unit_docs=[b.doc for b in blocks])


def score_plan(
    model,
    plan: BlockPlan,
    docs: Mapping[int, Sequence[int]] | Sequence[Sequence[int]],
    token_bytes: torch.Tensor,
    batch_tokens: int,
    progress: ProgressFn | None = None,
    keep_targets: bool = False,
) -> tuple[dict, dict[int, BpbResult]]:
    """The `bpb_length` metric (convention, per-length rows, skipped lengths) and the raw results per length
    (with each block's per-target nats when `keep_targets`)."""
    for s in plan.skipped:
        log.warning("BPB at length %d skipped: %s", s["length"], s["reason"])
    B = plan.block
    if plan.lengths:
        log.info(
            "BPB vs length: %d blocks of %d targets from %d docs, placed for L_k = %d (%d documents too short)",
            len(plan.blocks),
            B,
            plan.docs,
            plan.longest,
            len(plan.short_docs),
        )
        if not plan.budget_met:
            log.warning(
                "BPB vs length: the long documents allow only %d scored targets at length %d",
                plan.scored_positions,
                plan.longest,
            )
    rows, raw = [], {}
    parts = stages(progress, [length * len(plan.blocks) for length in plan.lengths])  # forward tokens
    for length, part in zip(plan.lengths, parts):
        kept = (
            torch.zeros(len(plan.blocks), B, dtype=torch.float64, device=token_bytes.device)
            if keep_targets
            else None
        )
        res = evaluate_bpb_blocks(model, docs, plan.blocks, length, B, token_bytes, batch_tokens, part, kept)
        if kept is not None:
            res.target_nats = kept.tolist()
        raw[length] = res
        rows.append(
            {
                "length": length,
                "bpb": res.bpb,
                "tokens": res.tokens,
                "docs": res.docs,
                "block": B,
                "blocks": len(plan.blocks),
                "context_min": length - B,
                "context_max": length - 1,
                "short_docs": len(plan.short_docs),
            }
        )
        log.info(
            "BPB at length %d: %.4f over %d tokens, %d blocks, %d docs",
            length,
            res.bpb,
            res.tokens,
            len(plan.blocks),
            res.docs,
        )
    metric = {
        "protocol": "same_targets",
        "convention": convention(B, plan.longest),
        "block": B,
        "longest": plan.longest,
        "start": plan.start,
        "document_start_in_view": bool(plan.blocks) and plan.start < 2 * plan.longest,
        "units": len(plan.blocks),
        "docs": plan.docs,
        "lengths": rows,
        "skipped": plan.skipped,
    }
    return metric, raw


def evaluate_bpb_by_length(
    model,
    docs: Sequence[Sequence[int]],
    lengths: Sequence[int],
    token_budget: int,
    token_bytes: torch.Tensor,
    batch_tokens: int,
    block: int | None = None,
) -> tuple[dict, dict[int, BpbResult]]:
    """Plan and score in one call, for documents already tokenized (BOS first); `block` = B (None: default)."""
    plan = plan_blocks([len(d) for d in docs], lengths, token_budget, block)
    return score_plan(model, plan, docs, token_bytes, batch_tokens)


def bigram_repeats(tokens: Sequence[int]) -> list[int]:
    """Per position i of a document: i - j for the latest j < i whose bigram (tokens[j-1], tokens[j]) equals
    (tokens[i-1], tokens[i]), else 0. A text feature (no model): how far back a copy of the target lies, which
    key-token BPB's selection rule reads (`rlab.report.estimands.key_tokens`)."""
    last: dict[tuple[int, int], int] = {}
    out = [0] * len(tokens)
    for i in range(1, len(tokens)):
        pair = (tokens[i - 1], tokens[i])
        out[i] = i - last[pair] if pair in last else 0
        last[pair] = i
    return out
