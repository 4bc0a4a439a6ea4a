"""Passkey scores its likelihood candidates from its generation's prefill: the same log-probabilities as CORE's
packed scoring of the same items (`likelihood.score_items`), and the same greedy outputs as `Engine.greedy`."""

from __future__ import annotations

import pytest
import torch

from rlab.core.engine import Engine
from rlab.evals.passkey.task import build_prompt, draw_key, evaluate_passkey
from rlab.evals.retrieval import likelihood as rl
from rlab.evals.retrieval.generation import Generation
from rlab.spec.rope import RopeSpec
from tests.evals.conftest import random_gpt

ROPES = [
    RopeSpec(),
    RopeSpec(variant="yarn", factor=4.0, original_len=64),
    RopeSpec(variant="dynamic-ntk", factor=4.0, original_len=64),
]


@pytest.mark.parametrize("rope", ROPES, ids=lambda r: str(r.variant))
def test_candidates_from_the_generation_prefill_score_as_packed_scoring(tokenizer, rope):
    """nanochat-2026 (smear, a sliding window shorter than the prompt) at two lengths and batch sizes, so rows of
    a batch have candidates of different token counts; dynamic-ntk takes the path with its own prefill."""
    torch.set_num_threads(1)
    model = random_gpt(
        tokenizer.vocab_size, sequence_len=64, n_embd=64, rope=rope, n_head=1, n_kv_head=1,
        architecture="nanochat-2026",
    )  # fmt: skip
    lengths, depths, trials, seed, choices = [200, 260], [0.0, 0.5], 3, 5, 6
    cells = (lengths, depths, trials, seed)
    got = evaluate_passkey(Generation(Engine(model), tokenizer, "cpu", 700), *cells, choices=choices)
    again = evaluate_passkey(Generation(Engine(model), tokenizer, "cpu", 10_000), *cells, choices=choices)
    items = [
        rl.make_item(
            tokenizer,
            "passkey",
            L,
            t,
            build_prompt(tokenizer, L, d, key := draw_key(seed, L, d, t)).tokens,
            [key],
            seed,
            choices,
            depth=d,
        )
        for L in lengths
        for d in depths
        for t in range(trials)
    ]
    assert len({len(c) for item in items for c in item.choices}) > 1  # ragged candidates within a batch
    with torch.no_grad():
        packed = rl.score_items(model, items, tokenizer.bos_token_id, "cpu", 4096)
    plain = evaluate_passkey(Generation(Engine(model), tokenizer, "cpu", 700), *cells)
    assert got.records == plain.records == again.records  # the generation scores did not change
    assert [s.item for s in got.choices] == items
    for ours, other, theirs in zip(got.choices, again.choices, packed, strict=True):
        assert ours.right == pytest.approx(theirs.right, abs=1e-4)
        assert ours.best_other == pytest.approx(theirs.best_other, abs=1e-4)
        assert (ours.right, ours.best_other) == pytest.approx((other.right, other.best_other), abs=1e-5)
