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

Scoring is batched: every sequence of many examples is length-sorted, packed into forward passes
under a token budget and right-padded (causal attention means padding never changes a real
position's logits), then the per-sequence results are regrouped per example. Per-example
correctness equals the one-example-per-forward definition (`evaluate_example`), which the tests
check on real bundle tasks.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlab.errors import EvalError
from rlab.evals.core_bundle import CoreBundle, TaskSpec, load_task_data
from rlab.evals.stats import Z95

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


def render_prompts(task: TaskSpec, data: Sequence[dict], idx: int, fewshot_seed: int = FEWSHOT_SEED) -> list[str]:
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
        raise EvalError("language_modeling prompt without the continuation does not tokenize as a prefix of the full prompt.")
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
    tokens = encode_batch(tokenizer, prompts)
    starts, ends = token_spans(task.task_type, tokens)
    if task.task_type == "language_modeling":
        tokens = [tokens[1]]
    if max_seq_len is not None:
        tokens, starts, ends = crop_left(tokens, starts, ends, max_seq_len)
    return EncodedExample(
        index=idx,
        source_index=idx if source_index is None else source_index,
        task_type=task.task_type,
        gold=data[idx].get("gold"),
        tokens=tokens,
        starts=starts,
        ends=ends,
    )


# ----------------------------------------------------------------------------- scoring


def _forward_rows(model, rows: list[list[int]], starts: list[int], ends: list[int], pad_id: int, device):
    """One forward over right-padded rows -> per row (mean span loss, span fully argmax-correct).

    Only the span positions are scored: their logits are gathered into one (N, V) block, so the
    loss/argmax cost is proportional to the spans and there is a single device-to-host copy.
    """
    import torch
    import torch.nn.functional as F

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, T)
    row_idx, pos_idx = [], []
    for i, (r, s, e) in enumerate(zip(rows, starts, ends)):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        row_idx += [i] * max(e - s, 0)
        pos_idx += range(s - 1, e - 1)  # position p predicts token p + 1
    ids = ids.to(device)
    rows_t = torch.tensor(row_idx, dtype=torch.long, device=device)  # (N,)
    pos_t = torch.tensor(pos_idx, dtype=torch.long, device=device)  # (N,)
    with torch.no_grad():
        logits = model(ids)  # (B, T, V)
        picked = logits[rows_t, pos_t].float()  # (N, V)
        targets = ids[rows_t, pos_t + 1]  # (N,)
        nll = F.cross_entropy(picked, targets, reduction="none").double()  # (N,)
        hit = (picked.argmax(dim=-1) == targets).double()  # (N,)
        B = len(rows)
        loss_sum = torch.zeros(B, dtype=torch.float64, device=device).index_add_(0, rows_t, nll)
        hit_sum = torch.zeros(B, dtype=torch.float64, device=device).index_add_(0, rows_t, hit)
        stats = torch.stack([loss_sum, hit_sum]).tolist()  # one transfer
    del logits, picked
    out: list[tuple[float, bool]] = []
    for i, (s, e) in enumerate(zip(starts, ends)):
        n = e - s
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
    """The reference definition: one example's sequences in one forward pass."""
    return judge(ex, _forward_rows(model, ex.tokens, ex.starts, ex.ends, pad_id, device))


def evaluate_examples_batched(
    model, examples: Sequence[EncodedExample], pad_id: int, device, batch_tokens: int
) -> list[bool]:
    """Correctness of every example, many examples per forward pass.

    All sequences are sorted by length (longest first) and packed greedily while
    rows x longest-row stays within `batch_tokens` (a row longer than the budget goes alone).
    """
    flat: list[tuple[int, int]] = [(e, j) for e, ex in enumerate(examples) for j in range(len(ex.tokens))]
    flat.sort(key=lambda ej: -len(examples[ej[0]].tokens[ej[1]]))
    scores: dict[tuple[int, int], tuple[float, bool]] = {}
    i = 0
    while i < len(flat):
        width = len(examples[flat[i][0]].tokens[flat[i][1]])
        n = max(1, batch_tokens // max(width, 1))
        chunk = flat[i : i + n]
        rows = [examples[e].tokens[j] for e, j in chunk]
        starts = [examples[e].starts[j] for e, j in chunk]
        ends = [examples[e].ends[j] for e, j in chunk]
        for key, sc in zip(chunk, _forward_rows(model, rows, starts, ends, pad_id, device)):
            scores[key] = sc
        i += len(chunk)
    return [judge(ex, [scores[(e, j)] for j in range(len(ex.tokens))]) for e, ex in enumerate(examples)]


def subsample(rows: list[dict], max_per_task: int | None, seed: int = SHUFFLE_SEED) -> tuple[list[dict], list[int]]:
    """nanochat's deterministic subsample: shuffle with `seed`, keep the first N.
    Returns the rows and their original line indices."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    if max_per_task is not None and max_per_task > 0:
        order = order[:max_per_task]
    return [rows[i] for i in order], order


def _dist_info() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def evaluate_task(
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
) -> list[bool]:
    """Per-example correctness over `rows` (already subsampled). Under torch.distributed each
    rank scores a strided slice and the results are summed across ranks."""
    import torch

    rank, world = _dist_info()
    mine = list(range(rank, len(rows), world))
    examples = [
        prepare_example(
            tokenizer,
            task,
            rows,
            i,
            source_index=None if source_indices is None else source_indices[i],
            max_seq_len=max_seq_len,
            fewshot_seed=fewshot_seed,
        )
        for i in mine
    ]
    pad_id = tokenizer.bos_token_id
    if batched:
        verdicts = evaluate_examples_batched(model, examples, pad_id, device, batch_tokens)
    else:
        verdicts = [evaluate_example(model, ex, pad_id, device) for ex in examples]
    correct = torch.zeros(len(rows), dtype=torch.float32, device=device)
    for i, ok in zip(mine, verdicts):
        correct[i] = float(ok)
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(correct, op=dist.ReduceOp.SUM)
    return [bool(v) for v in correct.tolist()]


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

    def core(self) -> float:
        return sum(t.centered for t in self.tasks) / len(self.tasks) if self.tasks else float("nan")

    def ci(self, z: float = Z95) -> tuple[float, float]:
        """Normal approximation: each task's accuracy is a binomial mean, independent across tasks,
        so var(CORE) = sum_t p_t(1-p_t)/n_t / (1-b_t)^2 / T^2."""
        if not self.tasks:
            return float("nan"), float("nan")
        var = 0.0
        for t in self.tasks:
            p, b = t.accuracy, 0.01 * t.task.baseline
            var += p * (1 - p) / max(t.n, 1) / (1 - b) ** 2
        se = math.sqrt(var) / len(self.tasks)
        core = self.core()
        return core - z * se, core + z * se

    def metrics(self) -> dict:
        """The `core` entry of eval.json."""
        lo, hi = self.ci()
        return {
            "core": self.core(),
            "ci_low": lo,
            "ci_high": hi,
            "partial": bool(self.missing),
            "missing_tasks": [t.label for t in self.missing],
            "tasks": {
                t.task.label: {
                    "accuracy": t.accuracy,
                    "centered": t.centered,
                    "baseline": t.task.baseline,
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
) -> CoreResult:
    """CORE over the bundle's present tasks (or `labels`); missing task files are carried into
    the result (partial) rather than dropped."""
    tasks = list(bundle.tasks) if labels is None else [bundle.task(lbl) for lbl in labels]
    missing = [t for t in bundle.missing if labels is None or t.label in labels]
    runnable = [t for t in tasks if t not in bundle.missing]
    results: list[TaskResult] = []
    for task in runnable:
        rows, order = subsample(load_task_data(task), max_per_task)
        correct = evaluate_task(
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
        )
        result = TaskResult(task=task, correct=correct, source_indices=order)
        log.info("CORE %s: accuracy %.4f centered %.4f (n=%d)", task.label, result.accuracy, result.centered, result.n)
        results.append(result)
        if on_task is not None:
            on_task(result)
    return CoreResult(tasks=results, missing=missing)
