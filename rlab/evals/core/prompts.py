"""CORE prompts: each example rendered for its task type, tokenized, and its scored spans found.

The definition (DCLM, arXiv 2406.11794, as nanochat renders it, so numbers are comparable):

* Few-shot examples for example `i` are drawn from the other rows with `random.Random(fewshot_seed + i)`
  (nanochat: 1234 + i) and rendered in their solved form, each followed by a blank line; then
    - multiple_choice: ``query + delim + choice`` for every choice (the choices share a prefix);
    - schema: ``context_option + delim + continuation`` for every option (they share a suffix);
    - language_modeling: ``context.strip() + delim`` with and without the continuation.
  Every prompt is tokenized with BOS prepended.
* The scored span of a sequence is the part after the common prefix (multiple_choice), the
  common suffix (schema), or the continuation (language_modeling). Sequences longer than the
  model's context are cropped from the left, the span indices shifted accordingly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlab.errors import EvalError
from rlab.evals.core.bundle import TaskSpec

FEWSHOT_SEED = 1234
"""nanochat draws example i's few-shot examples with random.Random(1234 + i)."""


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
