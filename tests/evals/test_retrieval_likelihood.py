"""Likelihood-scored retrieval: candidates of the same form, and scores equal to a plain forward per candidate."""

from __future__ import annotations

import math
import random
import re

import pytest
import torch

from rlab.core.engine import Engine
from rlab.core.gpt import GPT, GPTConfig
from rlab.core.optim import build_optimizers, set_lr_multiplier
from rlab.core.tokenizer import Tokenizer
from rlab.evals.passkey.task import build_prompt, draw_key, evaluate_passkey
from rlab.evals.retrieval import likelihood as rl
from rlab.evals.retrieval.generation import Generation
from rlab.paths import BaseLayout
from rlab.report.stats.uncertainty import wilson
from rlab.spec.rope import RopeSpec
from rlab.spec.train import LRSpec

torch.set_num_threads(1)


def test_candidates_have_the_form_of_the_answer():
    rng = random.Random(0)
    keys = rl.candidate_texts("passkey", ["4821"], (), rng, 9)
    assert keys[0] == " 4821" and len(set(keys)) == 10 and all(re.fullmatch(r" [1-9]\d{3}", k) for k in keys)
    values = ["1234567", "7654321", "5555555", "1000000"]
    lists = rl.candidate_texts("niah_multivalue", values, (), rng, 9)
    assert lists[0] == " 1234567, 7654321, 5555555, 1000000"
    assert all(re.fullmatch(r" \d{7}(, \d{7}){3}", c) for c in lists) and len(set(lists)) == 10
    names = rl.candidate_texts("vt", ["ABCDE", "FGHIJ", "KLMNO", "PQRST", "UVWXY"], (), rng, 4)
    assert all(re.fullmatch(r" [A-Z]{5}(, [A-Z]{5}){4}", c) for c in names)
    common = [f"w{i}" for i in range(10)]
    once = [f"o{i}" for i in range(12)]
    words = rl.candidate_texts("cwe", common, once, rng, 3)
    assert words[0] == " " + ", ".join(common)
    assert all(set(c.strip().split(", ")) <= set(once) and len(c.split(", ")) == 10 for c in words[1:])


def test_items_are_seeded_per_item_and_identical_for_every_arm(tokenizer):
    item = rl.make_item(tokenizer, "passkey", 256, 3, [1, 2, 3], ["48213"], seed=7, choices=5, depth=0.5)
    again = rl.make_item(tokenizer, "passkey", 256, 3, [1, 2, 3], ["48213"], seed=7, choices=5, depth=0.5)
    other = rl.make_item(tokenizer, "passkey", 256, 4, [1, 2, 3], ["48213"], seed=7, choices=5, depth=0.5)
    assert item == again and item.choices != other.choices and len(item.choices) == 5
    assert item.choices[0] == tokenizer.encode(" 48213")


@pytest.fixture(scope="module")
def tokenizer(tiny_base_dir):

    return Tokenizer.from_directory(BaseLayout(tiny_base_dir).tokenizer_dir)


def reference(model: GPT, item: rl.ChoiceItem) -> tuple[float, float]:
    """Each candidate after the prompt in its own row, right-padded to the longest (CORE's reference), full logits."""
    rows = [item.prompt + c for c in item.choices]
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    with torch.no_grad():
        logp = model(ids).log_softmax(-1)  # (B, T, V)
    means = []
    for i, c in enumerate(item.choices):
        start = len(item.prompt)
        means.append(sum(logp[i, start + j - 1, t].item() for j, t in enumerate(c)) / len(c))
    return means[0], max(means[1:])


@pytest.mark.parametrize("rope", [RopeSpec(), RopeSpec(variant="dynamic-ntk", factor=4.0, original_len=16)])
def test_scores_equal_a_plain_forward_per_candidate(rope):
    torch.manual_seed(0)
    model = GPT(GPTConfig(sequence_len=64, vocab_size=100, n_layer=2, n_head=2, n_kv_head=1, n_embd=32), rope)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    model.eval()
    gen = torch.Generator().manual_seed(1)
    items = [
        rl.ChoiceItem(
            "passkey",
            40,
            t,
            torch.randint(0, 100, (40,), generator=gen).tolist(),
            [torch.randint(0, 100, (n,), generator=gen).tolist() for n in (3, 2, 3, 4)],
        )
        for t in range(5)
    ]
    scores = rl.score_items(model, items, pad_id=0, device="cpu", batch_tokens=256)
    for item, score in zip(items, scores, strict=True):
        right, best = reference(model, item)
        assert score.right == pytest.approx(right, abs=1e-4) and score.best_other == pytest.approx(
            best, abs=1e-4
        )
        assert score.correct == (right > best) and score.margin == pytest.approx(right - best, abs=2e-4)


def test_summary_by_length_and_task():
    item = lambda task, length: rl.ChoiceItem(task, length, 0, [1], [[1], [2]])  # noqa: E731
    scores = [
        rl.ChoiceScore(item("vt", 64), -1.0, -2.0),
        rl.ChoiceScore(item("vt", 64), -3.0, -2.0),
        rl.ChoiceScore(item("cwe", 128), -1.0, -1.5),
    ]
    s = rl.summarize(scores, 10, by_task=True)
    assert (s["accuracy"], s["n"], s["chance"]) == (pytest.approx(2 / 3), 3, 0.1)
    assert s["margin"] == pytest.approx((1.0 - 1.0 + 0.5) / 3)
    assert [(c["task"], c["length"], c["accuracy"], c["n"]) for c in s["by_task"]] == [
        ("vt", 64, 0.5, 2),
        ("cwe", 128, 1.0, 1),
    ]
    assert [(c["length"], c["n"]) for c in s["by_length"]] == [(64, 2), (128, 1)]


# --- a model that copies scores above chance by likelihood ---


def copy_rows(length: int, batch: int, alphabet: int, bos: int, gen: torch.Generator) -> torch.Tensor:
    """Rows of random tokens (BOS first) in which one span of 8-16 tokens is written twice, at a random distance:
    only copying the earlier occurrence lowers the loss on the second."""
    rng = random.Random(int(torch.randint(1 << 30, (1,), generator=gen)))
    rows = torch.randint(alphabet, (batch, length + 1), generator=gen)
    rows[:, 0] = bos
    for row in rows:
        span = rng.randint(min(8, (length - 2) // 2), min(16, (length - 2) // 2))
        top = length - span  # distances log-uniform: short and long ones alike
        distance = int(math.exp(rng.uniform(math.log(span + 1), math.log(top)))) if top > span + 1 else span
        distance = max(span, min(distance, top))
        start = rng.randint(1, length + 1 - span - distance)
        row[start + distance : start + distance + span] = row[start : start + span].clone()
    return rows


@pytest.mark.slow
def test_a_model_that_copies_retrieves_by_likelihood_above_chance(tokenizer):
    """A tiny nanochat-2026 model trained only to copy (about a minute on a CPU; the demo's base learns the same
    from its copy records) finds the passkey by likelihood far above chance at its own length; the same
    model untrained is at 0 (uniform logits: every candidate ties). The generation score of the same keys is
    printed beside it, as the report shows both."""

    length, trials = 256, 40
    torch.manual_seed(0)
    config = GPTConfig(
        sequence_len=length, vocab_size=tokenizer.vocab_size, n_layer=2, n_head=1, n_kv_head=1, n_embd=128,
        architecture="nanochat-2026",
    )  # fmt: skip
    model = GPT(config)
    model.init_weights()

    def likelihood() -> list[rl.ChoiceScore]:
        items = []
        for t in range(trials):
            key = draw_key(1, length, 0.5, t)
            prompt = build_prompt(tokenizer, length, 0.5, key).tokens
            items.append(rl.make_item(tokenizer, "passkey", length, t, prompt, [key], 1, 10, depth=0.5))
        model.eval()
        scores = rl.score_items(model, items, tokenizer.bos_token_id, "cpu", 8192)
        model.train()
        model.set_rope(model.rope)  # fresh rotary tables: the scoring built them under inference mode
        return scores

    assert sum(s.correct for s in likelihood()) == 0
    optimizers = build_optimizers(model, LRSpec(), config.n_embd)
    gen = torch.Generator().manual_seed(0)
    alphabet = tokenizer.vocab_size - 9  # ordinary tokens only
    for step, rows_len in enumerate([32] * 300 + [64] * 150, start=1):
        set_lr_multiplier(optimizers, min(1.0, step / 20))
        rows = copy_rows(rows_len, 16, alphabet, tokenizer.bos_token_id, gen)
        model(rows[:, :-1], rows[:, 1:]).backward()
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)
    scores = likelihood()
    acc = wilson(sum(s.correct for s in scores), trials)
    assert acc is not None and acc.low > 0.1, acc  # chance = 1 / 10 choices
    assert sum(s.margin for s in scores) / trials > 0
    model.eval()
    with torch.no_grad():
        generation = evaluate_passkey(Generation(Engine(model), tokenizer, "cpu"), [length], [0.5], trials, 1)
    print(
        f"passkey at {length}: likelihood {acc.estimate:.2f} [{acc.low:.2f}, {acc.high:.2f}] (chance 0.10), "
        f"generation {generation.metrics()['overall']:.2f}"
    )
