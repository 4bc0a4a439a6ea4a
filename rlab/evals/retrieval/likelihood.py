"""Likelihood-scored retrieval: the right value against distractors of the same form, as CORE scores multiple choice.

Passkey and the RULER-style tasks are scored by generation (the published protocols): a small model that
copies a passage hundreds of tokens back can still score 0 there, because it never writes the key as the
first number of its greedy output. Here every item is also scored by likelihood, beside the generation score
and on the same prompts: the prompt is followed in turn by the right value and by `choices - 1` distractors
of the same form, and the model's mean log-probability per token of each (CORE's multiple-choice rule,
`rlab.evals.core.packed`, packed the same way: the prompt once, each candidate attending to it and itself)
decides. An item is correct when the right value beats every distractor; its margin is the right value's
mean log-probability minus the best distractor's (nats per token, > 0 when correct). Chance is 1 / choices.

The candidates, per task (distractors drawn from `stable_seed(seed, task, length, trial)`, so every arm sees
the same ones):

- passkey: " <key>" against other keys with the same number of digits;
- niah_multikey: " <value>" against other 7-digit numbers;
- niah_multivalue: " v1, v2, v3, v4" (the four values in the order of the text) against four other numbers;
- vt: " A, B, C, D, E" (the chain's variables in order) against five other 5-letter names;
- cwe: the 10 common words, comma-separated, against 10 words of the same list that occur once.

Per item the result is one `rlab.evals.retrieval.records.ChoiceTrial` row; accuracy and mean margin per length (and task)
are in eval.json, and their intervals are the report's, over items (the independent units).
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlab.evals.core.packed import score_examples_batched
from rlab.evals.core.prompts import EncodedExample
from rlab.evals.progress import ProgressFn
from rlab.evals.ranks import all_reduce_sum, rank_and_world
from rlab.evals.retrieval.generation import stable_seed

DEFAULT_CHOICES = 10
SCORING = (
    "likelihood: the right value against choices - 1 distractors of the same form after the same prompt; "
    "mean log-probability per token decides (CORE's multiple-choice rule); correct = the right value scores "
    "highest; margin = its mean log-probability minus the best distractor's (nats/token); chance = 1/choices"
)


@dataclass(frozen=True)
class ChoiceItem:
    """One item: its keys (task, length, depth, trial), the prompt and the candidates (index 0 = the right one)."""

    task: str
    length: int
    trial: int
    prompt: list[int]
    choices: list[list[int]]
    depth: float | None = None


@dataclass(frozen=True)
class ChoiceScore:
    item: ChoiceItem
    right: float
    """Mean log-probability per token of the right value."""
    best_other: float
    """The best distractor's."""

    @property
    def margin(self) -> float:
        return self.right - self.best_other

    @property
    def correct(self) -> bool:
        return self.right > self.best_other


def _distinct(rng: random.Random, draw, right: str, k: int) -> list[str]:
    out: list[str] = []
    while len(out) < k:
        value = draw(rng)
        if value != right and value not in out:
            out.append(value)
    return out


def number_like(rng: random.Random, right: str) -> str:
    """A random number with as many digits as `right` (no leading zero)."""
    n = len(right)
    return str(rng.randint(10 ** (n - 1) if n > 1 else 0, 10**n - 1))


def candidate_texts(
    task: str, references: Sequence[str], others: Sequence[str], rng: random.Random, k: int
) -> list[str]:
    """The right answer's text and `k` distractors of the same form (module docstring), each with its leading space."""
    if task in ("passkey", "niah_multikey"):
        right = references[0]
        return [f" {v}" for v in [right, *_distinct(rng, lambda r: number_like(r, right), right, k)]]
    if task == "niah_multivalue":
        right = ", ".join(references)
        lists = _distinct(rng, lambda r: ", ".join(number_like(r, v) for v in references), right, k)
        return [f" {v}" for v in [right, *lists]]
    if task == "vt":
        right = ", ".join(references)
        name = lambda r: "".join(r.choices(string.ascii_uppercase, k=len(references[0])))  # noqa: E731
        return [
            f" {v}"
            for v in [right, *_distinct(rng, lambda r: ", ".join(name(r) for _ in references), right, k)]
        ]
    if task == "cwe":
        right = ", ".join(references)
        pool = [w for w in others if w not in references]
        return [
            f" {v}"
            for v in [right, *_distinct(rng, lambda r: ", ".join(r.sample(pool, len(references))), right, k)]
        ]
    raise ValueError(f"no likelihood candidates for task {task!r}")


def make_item(
    tokenizer,
    task: str,
    length: int,
    trial: int,
    prompt: list[int],
    references: Sequence[str],
    seed: int,
    choices: int,
    depth: float | None = None,
    others: Sequence[str] = (),
) -> ChoiceItem:
    """One item's candidates, encoded (distractors seeded by (seed, task, length, depth, trial))."""
    rng = random.Random(stable_seed("choices", seed, task, length, depth, trial))
    texts = candidate_texts(task, references, others, rng, choices - 1)
    return ChoiceItem(task, length, trial, prompt, [tokenizer.encode(t) for t in texts], depth)


def score_items(
    model,
    items: Sequence[ChoiceItem],
    pad_id: int,
    device,
    batch_tokens: int,
    progress: ProgressFn | None = None,
) -> list[ChoiceScore]:
    """Every item's (right, best distractor) mean log-probabilities; ranks take items i = rank (mod world) and
    the results are summed across ranks, so they do not depend on world size."""
    import torch

    rank, world = rank_and_world()
    mine = list(range(rank, len(items), world))
    examples = [
        EncodedExample(
            index=i,
            source_index=i,
            task_type="multiple_choice",
            gold=0,
            tokens=[items[i].prompt + c for c in items[i].choices],
            starts=[len(items[i].prompt)] * len(items[i].choices),
            ends=[len(items[i].prompt) + len(c) for c in items[i].choices],
        )
        for i in mine
    ]
    values = torch.zeros(len(items), 2, dtype=torch.float64, device=device)
    if examples:
        scores = score_examples_batched(model, examples, pad_id, device, batch_tokens, progress)
        for i, per_choice in zip(mine, scores, strict=True):
            logp = [-loss for loss, _ in per_choice]  # mean log-probability per token of each candidate
            values[i, 0] = logp[0]
            values[i, 1] = max(logp[1:])
    all_reduce_sum(values)
    return [ChoiceScore(item, right, other) for item, (right, other) in zip(items, values.tolist())]


def _cell(scores: Sequence[ChoiceScore], **keys: Any) -> dict[str, Any]:
    n = len(scores)
    return {
        **keys,
        "accuracy": sum(s.correct for s in scores) / n,
        "margin": sum(s.margin for s in scores) / n,
        "n": n,
    }


def summarize(scores: Sequence[ChoiceScore], choices: int, by_task: bool) -> dict[str, Any]:
    """eval.json's `likelihood` record (`rlab.evals.retrieval.records.LikelihoodRetrieval`): overall, per length, per (task, length)."""
    lengths = sorted({s.item.length for s in scores})
    tasks = list(dict.fromkeys(s.item.task for s in scores))
    overall = _cell(scores) if scores else {"accuracy": None, "margin": None, "n": 0}
    return {
        "scoring": SCORING,
        "choices": choices,
        "chance": 1.0 / choices,
        **overall,
        "by_length": [_cell([s for s in scores if s.item.length == L], length=L) for L in lengths],
        "by_task": (
            [
                _cell(cell, task=t, length=L)
                for t in tasks
                for L in lengths
                if (cell := [s for s in scores if s.item.task == t and s.item.length == L])
            ]
            if by_task
            else []
        ),
    }
