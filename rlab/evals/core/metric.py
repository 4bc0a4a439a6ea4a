"""The DCLM CORE metric: prompt rendering, batched scoring, centered accuracy.

Definition (DCLM, arXiv 2406.11794, as nanochat evaluates it, so numbers are comparable):

* Each task's rows are shuffled with `random.Random(1337)`; `max_per_task` keeps the first N
  (a deterministic subsample). Few-shot examples for example `i` are drawn from the other rows
  with `random.Random(fewshot_seed + i)` (nanochat: 1234 + i).
* Prompts: a few-shot example is rendered as its solved form followed by a blank line; then
    - multiple_choice: ``query + delim + choice`` for every choice (the choices share a prefix);
    - schema: ``context_option + delim + continuation`` for every option (they share a suffix);
    - language_modeling: ``context.strip() + delim`` with and without the continuation.
  Every prompt is tokenized with BOS prepended.
* The scored span of a sequence is the part after the common prefix (multiple_choice), the
  common suffix (schema), or the continuation (language_modeling). Sequences longer than the
  model's context are cropped from the left, the span indices shifted accordingly.
* multiple_choice/schema: the option with the lowest mean cross-entropy over its span wins;
  language_modeling: correct iff greedy argmax reproduces every span token.
* Centered accuracy (acc - b)/(1 - b) with b = random baseline / 100; CORE = mean over tasks.

Reference scoring (`evaluate_example`, nanochat's): one example per forward, its sequences
stacked and right-padded, full logits at every position. Batched scoring computes the same
numbers with less work: each example becomes one packed row -- its sequences' common token prefix
once (the few-shot prompt and query of a multiple_choice task), then each sequence's remainder,
which continues the prefix's rotary positions and attends to the prefix and itself only (prompts
cropped from the left share a prefix only where cut at the same token: those go together, the
rest one plain row each). Rows are length-sorted and cut into batches under a token budget by
least padded cost (right padding never changes a real position), and the last block and the lm_head, soft-cap and log-softmax run only at the scored
positions (`rlab.evals.scored_forward`). Results equal the reference up to fp32 summation order;
the tests check verdicts example by example and span losses to 1e-5 on real bundle tasks.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlab.errors import EvalError
from rlab.evals.core.bundle import CoreBundle, TaskSpec, load_task_data
from rlab.evals.progress import ProgressFn, report, stages
from rlab.evals.ranks import all_reduce_sum, rank_and_world

log = logging.getLogger(__name__)

SHUFFLE_SEED = 1337
"""nanochat shuffles each task with this seed before `max_per_task` keeps the first N."""
FEWSHOT_SEED = 1234
"""nanochat draws example i's few-shot examples with random.Random(1234 + i)."""


# ----------------------------------------------------------------------------- rendering


def fewshot_indices(n_rows: int, idx: int, num_fewshot: int, seed: int = FEWSHOT_SEED) -> list[int]:
    """Indices of example `idx`'s few-shot examples: a seeded draw from the other rows."""
    if num_fewshot <= 0:
        return []
    if num_fewshot > n_rows - 1:
        raise EvalError(
            f"A {num_fewshot}-shot task needs at least {num_fewshot + 1} rows (have {n_rows}).",
            f"Raise max_per_task to at least {num_fewshot + 1}.",
        )
    rng = random.Random(seed + idx)
    others = [i for i in range(n_rows) if i != idx]
    return rng.sample(others, num_fewshot)


def render_multiple_choice(item: dict, delim: str, shots: Sequence[dict]) -> list[str]:
    """One prompt per choice; they share the context, so the choice is the scored span."""
    head = "".join(f"{ex['query']}{delim}{ex['choices'][ex['gold']]}\n\n" for ex in shots)
    return [f"{head}{item['query']}{delim}{choice}" for choice in item["choices"]]


def render_schema(item: dict, delim: str, shots: Sequence[dict]) -> list[str]:
    """One prompt per context option; they share the continuation, which is the scored span."""
    head = "".join(f"{ex['context_options'][ex['gold']]}{delim}{ex['continuation']}\n\n" for ex in shots)
    return [f"{head}{option}{delim}{item['continuation']}" for option in item["context_options"]]


def render_language_modeling(item: dict, delim: str, shots: Sequence[dict]) -> list[str]:
    """[prompt without continuation (stripped), prompt with it]; contexts are stripped because
    trailing whitespace would merge into the continuation's first token."""
    head = "".join(f"{str(ex['context']).strip()}{delim}{ex['continuation']}\n\n" for ex in shots)
    stem = f"{head}{str(item['context']).strip()}{delim}"
    return [stem.strip(), f"{stem}{item['continuation']}"]


RENDERERS: dict[str, Callable[[dict, str, Sequence[dict]], list[str]]] = {
    "multiple_choice": render_multiple_choice,
    "schema": render_schema,
    "language_modeling": render_language_modeling,
}


def render_prompts(
    task: TaskSpec, data: Sequence[dict], idx: int, fewshot_seed: int = FEWSHOT_SEED
) -> list[str]:
    """Prompts of example `idx` of `data` (the shuffled/subsampled rows) for its task type."""
    shots = [data[i] for i in fewshot_indices(len(data), idx, task.num_fewshot, fewshot_seed)]
    return RENDERERS[task.task_type](data[idx], task.continuation_delimiter, shots)


# ----------------------------------------------------------------------------- token spans


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    n = min(len(s) for s in seqs)
    for i in range(n):
        if any(s[i] != seqs[0][i] for s in seqs):
            return i
    return n


def common_suffix_len(seqs: Sequence[Sequence[int]]) -> int:
    n = min(len(s) for s in seqs)
    for i in range(1, n + 1):
        if any(s[-i] != seqs[0][-i] for s in seqs):
            return i - 1
    return n


@dataclass
class EncodedExample:
    """Token sequences of one example and the scored span [start, end) of each."""

    index: int
    """Position in the task's (shuffled, subsampled) rows."""
    source_index: int
    """Line number (0-based, non-blank lines) in the task's jsonl."""
    task_type: str
    gold: int | None
    tokens: list[list[int]]
    starts: list[int]
    ends: list[int]
    cropped: bool = False
    """Some prompt was longer than the model's context and lost its left end."""


def token_spans(task_type: str, tokens: list[list[int]]) -> tuple[list[int], list[int]]:
    """Scored span of every sequence, from the token ids alone."""
    ends = [len(t) for t in tokens]
    if task_type == "multiple_choice":
        start = common_prefix_len(tokens)
        return [start] * len(tokens), ends
    if task_type == "schema":
        suffix = common_suffix_len(tokens)
        return [e - suffix for e in ends], ends
    without, with_ = tokens
    if len(without) >= len(with_) or with_[: len(without)] != without:
        raise EvalError(
            "language_modeling prompt without the continuation does not tokenize as a prefix of the full prompt."
        )
    return [len(without)], [len(with_)]


def crop_left(tokens: list[list[int]], starts: list[int], ends: list[int], max_len: int):
    """Keep the last `max_len` tokens of each sequence, shifting its span; a span start that
    would fall on position 0 (no prediction for it) is moved to 1."""
    out_t, out_s, out_e = [], [], []
    for t, s, e in zip(tokens, starts, ends):
        cut = max(0, len(t) - max_len)
        out_t.append(t[cut:])
        out_s.append(max(1, s - cut))
        out_e.append(e - cut)
    return out_t, out_s, out_e


def encode_batch(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of each text with BOS prepended."""
    return tokenizer.encode(texts, prepend=tokenizer.bos_token_id)


def prepare_example(
    tokenizer: Any,
    task: TaskSpec,
    data: Sequence[dict],
    idx: int,
    *,
    source_index: int | None = None,
    max_seq_len: int | None = None,
    fewshot_seed: int = FEWSHOT_SEED,
) -> EncodedExample:
    """Render, tokenize and span one example; crop to `max_seq_len` from the left."""
    prompts = render_prompts(task, data, idx, fewshot_seed)
    return encoded_example(task, data, idx, encode_batch(tokenizer, prompts), source_index, max_seq_len)


def prepare_examples(
    tokenizer: Any,
    task: TaskSpec,
    data: Sequence[dict],
    indices: Sequence[int],
    *,
    source_indices: Sequence[int] | None = None,
    max_seq_len: int | None = None,
    fewshot_seed: int = FEWSHOT_SEED,
) -> list[EncodedExample]:
    """`prepare_example` for each of `indices`, with every prompt tokenized in one batch call
    (per-example calls spend more time starting the tokenizer's threads than encoding)."""
    prompts = [render_prompts(task, data, i, fewshot_seed) for i in indices]
    flat = encode_batch(tokenizer, [p for ps in prompts for p in ps])
    out, at = [], 0
    for i, ps in zip(indices, prompts, strict=True):
        src = None if source_indices is None else source_indices[i]
        out.append(encoded_example(task, data, i, flat[at : at + len(ps)], src, max_seq_len))
        at += len(ps)
    return out


def encoded_example(
    task: TaskSpec,
    data: Sequence[dict],
    idx: int,
    tokens: list[list[int]],
    source_index: int | None = None,
    max_seq_len: int | None = None,
) -> EncodedExample:
    """Example `idx` from its prompts' token ids (BOS first): spans, then the left crop."""
    starts, ends = token_spans(task.task_type, tokens)
    if task.task_type == "language_modeling":
        tokens = [tokens[1]]
    cropped = max_seq_len is not None and any(len(t) > max_seq_len for t in tokens)
    if max_seq_len is not None and cropped:
        tokens, starts, ends = crop_left(tokens, starts, ends, max_seq_len)
    return EncodedExample(
        index=idx,
        source_index=idx if source_index is None else source_index,
        task_type=task.task_type,
        gold=data[idx].get("gold"),
        tokens=tokens,
        starts=starts,
        ends=ends,
        cropped=cropped,
    )


# ----------------------------------------------------------------------------- scoring


def _forward_rows(model, rows: list[list[int]], starts: list[int], ends: list[int], pad_id: int, device):
    """The reference: one forward over right-padded rows with full logits (B, T, V) -> per row
    (mean span loss, span fully argmax-correct)."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, T)
    row_idx: list[int] = []
    pos_idx: list[int] = []
    for i, (r, s, e) in enumerate(zip(rows, starts, ends)):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        row_idx += [i] * max(e - s, 0)
        pos_idx += range(s - 1, e - 1)  # position p predicts token p + 1
    ids = ids.to(device)
    rows_t = torch.tensor(row_idx, dtype=torch.long, device=device)  # (N,)
    pos_t = torch.tensor(pos_idx, dtype=torch.long, device=device)  # (N,)
    with torch.inference_mode():
        logits = model(ids)  # (B, T, V)
        picked = logits[rows_t, pos_t].float()  # (N, V)
        targets = ids[rows_t, pos_t + 1]  # (N,)
        stats = _span_stats(picked, targets, rows_t, len(rows))
    return _scores(stats, [e - s for s, e in zip(starts, ends)])


def _span_stats(logits, targets, seq_idx, n_seqs: int) -> list[list[float]]:
    """Per-position nll / argmax hits (logits (N, V), targets (N,)) summed per sequence -> [loss sums, hit sums]."""
    import torch.nn.functional as F

    nll = F.cross_entropy(logits, targets, reduction="none")  # (N,)
    hit = logits.argmax(dim=-1) == targets  # (N,)
    return _sum_per_seq(nll, hit, seq_idx, n_seqs)


def _sum_per_seq(nll, hit, seq_idx, n_seqs: int) -> list[list[float]]:
    """Per-position nll and argmax hits (N,) summed per sequence (fp64) -> [loss sums, hit sums]."""
    import torch

    loss_sum = torch.zeros(n_seqs, dtype=torch.float64, device=nll.device).index_add_(
        0, seq_idx, nll.double()
    )
    hit_sum = torch.zeros(n_seqs, dtype=torch.float64, device=nll.device).index_add_(0, seq_idx, hit.double())
    return torch.stack([loss_sum, hit_sum]).tolist()  # one device-to-host transfer


def _scores(stats: list[list[float]], span_lens: list[int]) -> list[tuple[float, bool]]:
    out: list[tuple[float, bool]] = []
    for i, n in enumerate(span_lens):
        if n <= 0:  # empty span (a choice that is a prefix of another): never the argmin
            out.append((math.inf, False))
        else:
            out.append((stats[0][i] / n, stats[1][i] == n))
    return out


def judge(ex: EncodedExample, scores: list[tuple[float, bool]]) -> bool:
    """Correctness of one example from its sequences' (mean loss, all-match) scores."""
    if ex.task_type == "language_modeling":
        return scores[0][1]
    losses = [s[0] for s in scores]
    return losses.index(min(losses)) == ex.gold


def evaluate_example(model, ex: EncodedExample, pad_id: int, device) -> bool:
    """The reference definition: one example's sequences in one forward pass, full logits."""
    return judge(ex, _forward_rows(model, ex.tokens, ex.starts, ex.ends, pad_id, device))


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

    from rlab.evals.scored_forward import head_stats, hidden_at

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
        stats = _sum_per_seq(nll, hit, torch.tensor(seq_idx, dtype=torch.long, device=device), len(span_lens))
    flat = iter(_scores(stats, span_lens))
    return [[next(flat) for _ in p.targets] for p in packs]


def _freq_key(model, pack: PackedExample) -> int | None:
    """The length a length-dependent RoPE variant evaluates the reference at (lengths with the same
    frequencies share one, `rope.frequency_length`); None when the variant does not depend on length."""
    from rlab.core.rope import frequency_length

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


def evaluate_examples_batched(
    model,
    examples: Sequence[EncodedExample],
    pad_id: int,
    device,
    batch_tokens: int,
    progress: ProgressFn | None = None,
) -> list[bool]:
    """Correctness of every example, scored by `score_examples_batched`."""
    scores = score_examples_batched(model, examples, pad_id, device, batch_tokens, progress)
    return [judge(ex, sc) for ex, sc in zip(examples, scores)]


def subsample(
    rows: list[dict], max_per_task: int | None, seed: int = SHUFFLE_SEED
) -> tuple[list[dict], list[int]]:
    """nanochat's deterministic subsample: shuffle with `seed`, keep the first N.
    Returns the rows and their original line indices."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    if max_per_task is not None and max_per_task > 0:
        order = order[:max_per_task]
    return [rows[i] for i in order], order


@dataclass
class TaskScore:
    correct: list[bool]
    cropped: int
    """Examples with a prompt cropped to the model's context (over all ranks)."""


def evaluate_task(model, tokenizer, task: TaskSpec, rows: list[dict], device, **kwargs) -> list[bool]:
    """Per-example correctness over `rows` (`score_task`'s, without the crop count)."""
    return score_task(model, tokenizer, task, rows, device, **kwargs).correct


def score_task(
    model,
    tokenizer,
    task: TaskSpec,
    rows: list[dict],
    device,
    *,
    source_indices: Sequence[int] | None = None,
    max_seq_len: int | None = None,
    batch_tokens: int = 8192,
    fewshot_seed: int = FEWSHOT_SEED,
    batched: bool = True,
    progress: ProgressFn | None = None,
) -> TaskScore:
    """Per-example correctness over `rows` (already subsampled), and how many were cropped. Under
    torch.distributed each rank scores a strided slice and the results are summed across ranks."""
    import torch

    rank, world = rank_and_world()
    mine = list(range(rank, len(rows), world))
    examples = prepare_examples(
        tokenizer,
        task,
        rows,
        mine,
        source_indices=source_indices,
        max_seq_len=max_seq_len,
        fewshot_seed=fewshot_seed,
    )
    pad_id = tokenizer.bos_token_id
    if batched:
        verdicts = evaluate_examples_batched(model, examples, pad_id, device, batch_tokens, progress)
    else:
        verdicts = []
        for ex in examples:
            report(progress, len(verdicts), len(examples))
            verdicts.append(evaluate_example(model, ex, pad_id, device))
        report(progress, len(verdicts), len(examples))
    counts = torch.zeros(len(rows) + 1, dtype=torch.float32, device=device)  # per-example correct, then crops
    for i, ok in zip(mine, verdicts):
        counts[i] = float(ok)
    counts[-1] = float(sum(ex.cropped for ex in examples))
    values = all_reduce_sum(counts).tolist()
    return TaskScore(correct=[bool(v) for v in values[:-1]], cropped=int(values[-1]))


# ----------------------------------------------------------------------------- aggregation


def centered_accuracy(accuracy: float, baseline_percent: float) -> float:
    """(acc - b) / (1 - b) with b = baseline_percent / 100: 0 = random guessing, 1 = perfect."""
    b = 0.01 * baseline_percent
    return (accuracy - b) / (1.0 - b)


@dataclass
class TaskResult:
    task: TaskSpec
    correct: list[bool]
    source_indices: list[int]
    cropped: int = 0

    @property
    def n(self) -> int:
        return len(self.correct)

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / self.n if self.n else float("nan")

    @property
    def centered(self) -> float:
        return centered_accuracy(self.accuracy, self.task.baseline)


@dataclass
class CoreResult:
    tasks: list[TaskResult]
    missing: list[TaskSpec] = field(default_factory=list)
    selection: list[str] | None = None
    """The labels asked for when a subset of the bundle was (None: all of them)."""
    bundle_tasks: int | None = None

    def core(self) -> float:
        return sum(t.centered for t in self.tasks) / len(self.tasks) if self.tasks else float("nan")

    def cropped(self) -> int:
        """Examples whose prompt was cropped to the model's context, over every task."""
        return sum(t.cropped for t in self.tasks)

    def metrics(self) -> dict:
        """The `core` section of eval.json (`rlab.records.CoreMetric`; baselines as fractions)."""
        return {
            "core": self.core(),
            "partial": bool(self.missing),
            "missing_tasks": [t.label for t in self.missing],
            "selection": self.selection,
            "bundle_tasks": self.bundle_tasks,
            "tasks": {
                t.task.label: {
                    "accuracy": t.accuracy,
                    "centered": t.centered,
                    "baseline": 0.01 * t.task.baseline,
                    "n": t.n,
                    "type": t.task.task_type,
                }
                for t in self.tasks
            },
        }


def evaluate_core(
    model,
    tokenizer,
    bundle: CoreBundle,
    device,
    *,
    max_per_task: int | None = None,
    max_seq_len: int | None = None,
    batch_tokens: int = 8192,
    fewshot_seed: int = FEWSHOT_SEED,
    labels: Sequence[str] | None = None,
    batched: bool = True,
    on_task: Callable[[TaskResult], None] | None = None,
    progress: ProgressFn | None = None,
) -> CoreResult:
    """CORE over the bundle's present tasks (or `labels`); missing task files are carried into
    the result (partial) rather than dropped. `progress` counts examples over all tasks."""
    tasks = list(bundle.tasks) if labels is None else [bundle.task(lbl) for lbl in labels]
    missing = [t for t in bundle.missing if labels is None or t.label in labels]
    runnable = [t for t in tasks if t not in bundle.missing]
    data = [subsample(load_task_data(task), max_per_task) for task in runnable]
    results: list[TaskResult] = []
    for task, (rows, order), part in zip(runnable, data, stages(progress, [len(rows) for rows, _ in data])):
        score = score_task(
            model,
            tokenizer,
            task,
            rows,
            device,
            source_indices=order,
            max_seq_len=max_seq_len,
            batch_tokens=batch_tokens,
            fewshot_seed=fewshot_seed,
            batched=batched,
            progress=part,
        )
        result = TaskResult(task=task, correct=score.correct, source_indices=order, cropped=score.cropped)
        log.info(
            "CORE %s: accuracy %.4f centered %.4f (n=%d)",
            task.label,
            result.accuracy,
            result.centered,
            result.n,
        )
        results.append(result)
        if on_task is not None:
            on_task(result)
    return CoreResult(
        tasks=results,
        missing=missing,
        selection=None if labels is None else list(labels),
        bundle_tasks=len(bundle.labels),
    )
