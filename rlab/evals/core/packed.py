"""CORE scored in batches: each example packed into one row, rows batched by least padded cost.

Each example becomes one packed row: its sequences' common token prefix once (the few-shot prompt and
query of a multiple_choice task), then each sequence's remainder, which continues the prefix's rotary
positions and attends to the prefix and itself only (prompts cropped from the left share a prefix only
where cut at the same token: those go together, the rest one plain row each). Rows are length-sorted and
cut into batches under a token budget by least padded cost (right padding never changes a real position),
and the last block and the lm_head, soft-cap and log-softmax run only at the scored positions
(`rlab.evals.scored_forward`). Results equal the reference (`rlab.evals.core.reference`) up to fp32
summation order; the tests check verdicts example by example and span losses to 1e-5 on real bundle tasks.
Likelihood-scored retrieval (`rlab.evals.retrieval.likelihood`) scores its candidates the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rlab.core.rope import frequency_length
from rlab.evals.core.prompts import EncodedExample, common_prefix_len
from rlab.evals.core.reference import span_scores, sum_per_seq
from rlab.evals.progress import ProgressFn, report
from rlab.evals.scored_forward import head_stats, hidden_at


@dataclass
class PackedExample:
    """One example's sequences in one row: their common token prefix once, then each sequence's
    remainder. Remainder j continues the prefix's positions and attends to the prefix and itself
    only, so every token sees exactly the context it has in its own sequence."""

    tokens: list[int]
    positions: list[int]
    """Rotary position of each token (the prefix 0..P-1, each remainder P..len-1)."""
    segments: list[int]
    """0 = the shared prefix, j + 1 = remainder of sequence j."""
    score_at: list[list[int]]
    """Per sequence: the packed indices whose next-token predictions are scored."""
    targets: list[list[int]]
    """Per sequence: the span's tokens (what those indices should predict)."""
    freq_len: int
    """Longest sequence: the width the reference pads this example to."""
    seq_ids: list[int] = field(default_factory=list)
    """Which of the example's sequences this row holds, in row order (empty = all, in order)."""


def pack_example(ex: EncodedExample) -> PackedExample:
    seqs = ex.tokens
    shared = common_prefix_len(seqs) if len(seqs) > 1 else len(seqs[0])
    tokens, positions, segments = list(seqs[0][:shared]), list(range(shared)), [0] * shared
    score_at, targets = [], []
    for j, (row, s, e) in enumerate(zip(seqs, ex.starts, ex.ends)):
        offset = len(tokens) - shared  # packed index of row position p >= shared
        tokens += row[shared:]
        positions += range(shared, len(row))
        segments += [j + 1] * (len(row) - shared)
        # position p predicts token p + 1
        score_at.append([p if p < shared else p + offset for p in range(s - 1, e - 1)])
        targets.append(row[s:e])
    return PackedExample(tokens, positions, segments, score_at, targets, max(len(r) for r in seqs))


def _row_cost(length: int, n_embd: int) -> float:
    """Relative forward cost of one row: per token, the matmuls (~24 d^2 per layer) plus attention
    over the row (~4 T d per layer; a branch mask cannot skip the upper triangle)."""
    return length * (1.0 + length / (6.0 * n_embd))


def _prefix_groups(seqs: Sequence[Sequence[int]]) -> list[list[int]]:
    """Sequences linked when they share a prefix longer than half the shorter one, grouped
    transitively; groups in order of their first member, members in order. (Prompts cropped from
    the left share a prefix only when they were cut at the same token.)"""
    group = list(range(len(seqs)))  # group[j]: the smallest member linked to j so far
    for j in range(len(seqs)):
        for k in range(j):
            if 2 * common_prefix_len([seqs[j], seqs[k]]) > min(len(seqs[j]), len(seqs[k])):
                old, new = max(group[j], group[k]), min(group[j], group[k])
                group = [new if g == old else g for g in group]
    return [[j for j in range(len(seqs)) if group[j] == g] for g in sorted(set(group))]


def plan_rows(ex: EncodedExample, n_embd: int) -> list[PackedExample]:
    """The rows to score `ex` with: one packed row when sharing the prefix saves work (few-shot
    prompts, long queries); else one packed row per group of sequences that share a long prefix
    (`_prefix_groups`: prompts cropped from the left at the same token) where that saves work, and
    one plain row per remaining sequence. `seq_ids` says which sequences each row holds."""

    def cost(rows: Sequence[Sequence[int]]) -> float:
        return sum(_row_cost(len(r), n_embd) for r in rows)

    packed = pack_example(ex)
    packed.seq_ids = list(range(len(ex.tokens)))
    if len(ex.tokens) == 1 or cost([packed.tokens]) < cost(ex.tokens):
        return [packed]
    rows = []
    for ids in _prefix_groups(ex.tokens):
        sub = EncodedExample(
            ex.index,
            ex.source_index,
            ex.task_type,
            ex.gold,
            [ex.tokens[j] for j in ids],
            [ex.starts[j] for j in ids],
            [ex.ends[j] for j in ids],
        )
        together = pack_example(sub)
        parts = (
            [(together, ids)]
            if len(ids) > 1 and cost([together.tokens]) < cost(sub.tokens)
            else [
                (
                    pack_example(
                        EncodedExample(ex.index, ex.source_index, ex.task_type, ex.gold, [t], [s], [e])
                    ),
                    [j],
                )
                for j, t, s, e in zip(ids, sub.tokens, sub.starts, sub.ends)
            ]
        )
        for row, row_ids in parts:
            row.freq_len = packed.freq_len  # the reference pads every sequence to the example's longest
            row.seq_ids = row_ids
            rows.append(row)
    return rows


def _forward_packed(model, packs: Sequence[PackedExample], pad_id: int, device, freq_len: int | None):
    """One forward over right-padded packed rows; the last block and the lm_head run on the scored
    positions only (`rlab.evals.scored_forward`).
    Returns, per pack, its sequences' (mean span loss, span fully argmax-correct)."""
    import torch

    B, W = len(packs), max(len(p.tokens) for p in packs)
    ids = torch.full((B, W), pad_id, dtype=torch.long)  # (B, T)
    pos = torch.zeros((B, W), dtype=torch.long)  # (B, T)
    seg = torch.full((B, W), -1, dtype=torch.long)  # (B, T); -1 = padding
    row_idx: list[int] = []
    col_idx: list[int] = []
    tgt: list[int] = []
    seq_idx: list[int] = []
    span_lens: list[int] = []
    for i, p in enumerate(packs):
        n = len(p.tokens)
        ids[i, :n] = torch.tensor(p.tokens, dtype=torch.long)
        pos[i, :n] = torch.tensor(p.positions, dtype=torch.long)
        seg[i, :n] = torch.tensor(p.segments, dtype=torch.long)
        for at, t in zip(p.score_at, p.targets):
            row_idx += [i] * len(at)
            col_idx += at
            tgt += t
            seq_idx += [len(span_lens)] * len(at)
            span_lens.append(len(t))
    branched = bool((seg > 0).any())
    with torch.inference_mode():
        ids = ids.to(device)
        if branched:
            causal = torch.ones(W, W, dtype=torch.bool).tril()  # (T, T)
            # a token sees earlier tokens of the prefix and of its own segment (padding: prefix + padding)
            mask = ((seg[:, None, :] == 0) | (seg[:, None, :] == seg[:, :, None])) & causal  # (B, T, T)
            hidden = hidden_at(
                model, ids, row_idx, col_idx, pos.to(device), mask[:, None].to(device), freq_len
            )
        else:  # every pack is one plain sequence: the ordinary causal forward
            hidden = hidden_at(model, ids, row_idx, col_idx, freq_len=freq_len)  # (N, C)
        targets = torch.tensor(tgt, dtype=torch.long, device=device)  # (N,)
        nll, hit = head_stats(model, hidden, targets)  # (N,) each
        stats = sum_per_seq(nll, hit, torch.tensor(seq_idx, dtype=torch.long, device=device), len(span_lens))
    flat = iter(span_scores(stats, span_lens))
    return [[next(flat) for _ in p.targets] for p in packs]


def _freq_key(model, pack: PackedExample) -> int | None:
    """The length a length-dependent RoPE variant evaluates the reference at (lengths with the same
    frequencies share one, `rope.frequency_length`); None when the variant does not depend on length."""

    rope = getattr(model, "rope", None)
    return None if rope is None else frequency_length(rope, pack.freq_len)


FORWARD_OVERHEAD = 64.0
"""The fixed cost of one forward pass in `_row_cost` units (about tokens): measured 3-4 ms for the
4-layer, width-256 bench model on a 2-core CPU, the time of 60-90 tokens in a batch."""


def split_batches(widths: Sequence[int], budget: int, n_embd: int) -> list[int]:
    """Sizes of consecutive batches of rows with `widths` (sorted longest first), each row padded to
    its batch's first: the split with the least padded cost (`_row_cost`) plus `FORWARD_OVERHEAD`
    per forward, under rows x first width <= `budget` (a row longer than the budget goes alone).
    Dynamic programming over split points; O(rows x rows per batch)."""
    n = len(widths)
    best = [0.0] + [math.inf] * n  # best[j]: cheapest cost of rows [0, j)
    cut = [0] * (n + 1)  # cut[j]: where the last batch of that split starts
    for i in range(n):  # best[i] is final here: every batch ends after it starts
        per_row = _row_cost(widths[i], n_embd)
        for j in range(i + 1, min(n, i + max(1, budget // max(widths[i], 1))) + 1):
            cost = best[i] + (j - i) * per_row + FORWARD_OVERHEAD
            if cost < best[j]:
                best[j], cut[j] = cost, i
    sizes, j = [], n
    while j > 0:
        sizes.append(j - cut[j])
        j = cut[j]
    return sizes[::-1]


def score_examples_batched(
    model,
    examples: Sequence[EncodedExample],
    pad_id: int,
    device,
    batch_tokens: int,
    progress: ProgressFn | None = None,
) -> list[list[tuple[float, bool]]]:
    """Per example, its sequences' (mean span loss, span fully argmax-correct), many examples per
    forward pass, each packed into one row (`pack_example`).

    Examples whose sequences share little go in as one plain row per sequence (`plan_rows`).
    Rows are sorted by length (longest first, so neighbours pad little) and cut into batches by
    `split_batches` (rows x longest row within `batch_tokens`; a longer row goes alone). Only the
    scored positions reach the last block and the lm_head. Branched and plain rows go to different
    forwards, and so, for length-dependent RoPE variants, do rows whose reference length differs.
    """
    n_embd = model.config.n_embd
    packs, owner = [], []  # owner[k]: the example row k belongs to
    for e, ex in enumerate(examples):
        for row in plan_rows(ex, n_embd):
            packs.append(row)
            owner.append(e)
    # rows of one forward share a group: the same RoPE evaluation length, and branched (masked
    # attention) or not (plain causal attention, which skips the upper triangle)
    keys = [(_freq_key(model, p) or 0, max(p.segments, default=0) > 0) for p in packs]
    order = sorted(range(len(packs)), key=lambda k: (keys[k], -len(packs[k].tokens)))
    row_scores: list[list[tuple[float, bool]]] = [[] for _ in packs]
    start, done = 0, 0
    report(progress, done, len(packs))
    while start < len(order):
        stop = start
        while stop < len(order) and keys[order[stop]] == keys[order[start]]:
            stop += 1
        group = order[start:stop]
        freq_len = keys[group[0]][0] or None
        for size in split_batches([len(packs[k].tokens) for k in group], batch_tokens, n_embd):
            chunk, group = group[:size], group[size:]
            for k, sc in zip(
                chunk, _forward_packed(model, [packs[k] for k in chunk], pad_id, device, freq_len)
            ):
                row_scores[k] = sc
            done += len(chunk)
            report(progress, done, len(packs))
        start = stop
    scores: list[list[tuple[float, bool]]] = [[(math.nan, False)] * len(ex.tokens) for ex in examples]
    for k, e in enumerate(owner):
        for j, sc in zip(packs[k].seq_ids, row_scores[k], strict=True):
            scores[e][j] = sc
    return scores
