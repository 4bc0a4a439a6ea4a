"""RULER-style tasks: exact lengths, answers present in the prompt, seeded independent examples, scoring."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
import torch

from rlab.core.engine import Engine
from rlab.errors import EvalError
from rlab.evals.retrieval.generation import Generation, stable_seed
from rlab.evals.ruler.tasks import MAX_NEW, TASKS, Haystack, evaluate_ruler, string_match_all
from tests.evals.conftest import bundle_texts, random_gpt


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rows = bundle_texts(per_file=30)
    return [" ".join(rows[i : i + 200]) for i in range(0, len(rows), 200)]


@pytest.fixture(scope="module")
def hay(tokenizer, texts) -> Haystack:
    return Haystack(tokenizer, texts)


def example(hay, task, length, trial, seed=0):
    return TASKS[task](hay, random.Random(stable_seed("ruler", task, seed, length, trial)), length)


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("length", [512, 1024])
def test_prompt_length_and_answers_in_context(hay, tokenizer, task, length):
    ex = example(hay, task, length, 0)
    assert (
        len(ex.prompt) == length - ex.max_new
        and ex.max_new >= MAX_NEW[task]
        and ex.prompt[0] == tokenizer.bos_token_id
    )
    text = tokenizer.decode(ex.prompt)
    for ref in ex.references:
        assert ref in text
    if task == "cwe":
        listed = Counter(re.findall(r"\d+\. (\w+)", text))
        least_common = min(listed[w] for w in ex.references)
        others = [n for w, n in listed.items() if w not in ex.references]
        assert least_common >= 3 and max(others) < least_common
    if task == "vt":
        first = text.index(f"VAR {ex.references[0]} = ")
        assert all(text.index(f"VAR {n} = VAR") > first for n in ex.references[1:])  # the chain is in order


def test_examples_are_seeded_and_independent(hay):
    a = [example(hay, "niah_multikey", 512, t) for t in range(5)]
    assert a == [example(hay, "niah_multikey", 512, t) for t in range(5)]
    assert len({tuple(e.prompt) for e in a}) == 5
    assert example(hay, "niah_multikey", 512, 0, seed=1) != a[0]


def test_string_match_all():
    assert string_match_all("The numbers are 1234567, 7654321.", ["1234567", "7654321"]) == 1.0
    assert string_match_all("abc", ["ABC", "xyz"]) == 0.5


def test_haystack_needs_text(tokenizer):
    with pytest.raises(EvalError, match="long documents"):
        Haystack(tokenizer, [])
    with pytest.raises(EvalError, match="distinct words"):
        Haystack(tokenizer, ["only a few words here " * 50])


class OracleEngine:
    """Test double for the engine: answers each prompt with its references (or nothing, for odd trials)."""

    def __init__(self, tokenizer, answers: dict[tuple[int, ...], list[str]]) -> None:
        self.tok, self.answers = tokenizer, answers

    def greedy(self, prompts, max_tokens):
        outs = []
        for p in prompts:
            refs = self.answers.get(tuple(p), [])
            outs.append(self.tok.encode(" " + ", ".join(refs))[:max_tokens])
        return outs


def test_scores_by_task_and_length(hay, tokenizer, texts):
    tasks, lengths, trials = ["niah_multikey", "vt"], [400, 600], 4
    answers = {}
    for task in tasks:
        for L in lengths:
            for t in range(trials):
                ex = example(hay, task, L, t, seed=3)
                answers[tuple(ex.prompt)] = ex.references if t % 2 == 0 else []
    gen = Generation(OracleEngine(tokenizer, answers), tokenizer, "cpu")
    res = evaluate_ruler(gen, texts, tasks, lengths + [20], trials, 3)
    m = res.metrics()
    assert m["units"] == 16 and m["lengths"] == [400, 600]
    assert {(s["task"], s["length"]) for s in m["skipped"]} == {("niah_multikey", 20), ("vt", 20)}
    assert all(r["score"] == 0.5 and r["n"] == 4 for r in m["by_task"])
    assert [r["score"] for r in m["by_length"]] == [0.5, 0.5]
    assert "Hsieh" in m["citation"] and "RULER-style" in m["name"]


def test_random_model_end_to_end_batch_invariant(tokenizer, texts):
    torch.set_num_threads(1)
    model = random_gpt(tokenizer.vocab_size)
    args = (texts, ["niah_multikey"], [400], 2, 0)
    a = evaluate_ruler(Generation(Engine(model), tokenizer, "cpu", batch_tokens=410), *args)
    b = evaluate_ruler(Generation(Engine(model), tokenizer, "cpu", batch_tokens=10_000), *args)
    assert a.records == b.records and len(a.records) == 2
    assert all(0.0 <= r.score <= 1.0 for r in a.records)
