"""Passkey: prompt construction at the requested depth, scoring, and a key-echoing model scores 100%."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from rlab.core.engine import Engine
from rlab.errors import EvalError
from rlab.evals.passkey.task import (
    FILLER,
    KEY_MAX,
    KEY_MIN,
    NEEDLE,
    QUESTION,
    build_prompt,
    draw_key,
    evaluate_passkey,
    first_number,
)
from rlab.evals.retrieval.generation import Generation
from rlab.spec.eval import EvalSpec
from tests.evals.conftest import random_gpt


class EchoKeyModel(torch.nn.Module):
    """Test double for scoring: a perfect retriever. It reads the tokens after the needle's
    "The secret number is" in its context and emits them one by one."""

    def __init__(self, tokenizer) -> None:
        super().__init__()
        self.tok = tokenizer
        self.marker = tokenizer.encode("The secret number is")
        self.stop = tokenizer.encode(".")[0]
        self.vocab = tokenizer.vocab_size
        self.config = SimpleNamespace(n_kv_head=1, n_head=1, n_embd=4, n_layer=1)
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.history: list[list[int]] = []
        self.prompt_len = 0

    def forward(self, idx, targets=None, kv_cache=None, loss_reduction="mean", last_logits=False):
        rows = idx.tolist()
        if kv_cache is None or kv_cache.pos == 0:
            self.history, self.prompt_len = rows, len(rows[0])
        else:
            self.history = [h + r for h, r in zip(self.history, rows)]
        if kv_cache is not None:
            kv_cache.advance(idx.size(1))
        logits = torch.zeros(idx.size(0), idx.size(1), self.vocab)
        m = len(self.marker)
        for b, h in enumerate(self.history):
            at = next(i for i in range(len(h)) if h[i : i + m] == self.marker) + m
            answer = h[at : h.index(self.stop, at)] + [self.stop]
            done = len(h) - self.prompt_len
            logits[b, -1, answer[min(done, len(answer) - 1)]] = 10.0
        return logits[:, -1:] if last_logits else logits


@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 0.9])
def test_prompt_has_the_exact_length_and_the_key_at_depth(tokenizer, depth):
    key = draw_key(1234, 400, depth, 0)
    p = build_prompt(tokenizer, 400, depth, key)
    assert len(p.tokens) == 400 and p.tokens[0] == tokenizer.bos_token_id
    text = tokenizer.decode(p.tokens)
    assert NEEDLE.format(key=key) in text and text.endswith(QUESTION)
    unit = len(tokenizer.encode(FILLER))
    needle_len = len(tokenizer.encode(NEEDLE.format(key=key)))
    filler = p.filler_end - p.filler_start - needle_len
    assert abs((p.needle_start - p.filler_start) - depth * filler) <= unit
    # filler always separates the needle from the question
    assert p.filler_end - (p.needle_start + needle_len) >= unit


def test_too_short_length_is_an_error(tokenizer):
    with pytest.raises(EvalError, match="too short"):
        build_prompt(tokenizer, 10, 0.5, "12345")


def test_keys_are_independent_per_cell_and_in_yarn_range():
    keys = [draw_key(7, L, d, t) for L in (256, 512) for d in (0.0, 0.5) for t in range(20)]
    assert keys == [draw_key(7, L, d, t) for L in (256, 512) for d in (0.0, 0.5) for t in range(20)]
    assert all(KEY_MIN <= int(k) <= KEY_MAX for k in keys)
    assert len(set(keys)) > 70  # 80 cells, not one key reused across (length, depth)
    assert first_number(" 48213. Remember") == "48213" and first_number("none") is None


def test_depth_beyond_0_9_is_rejected_by_the_spec():

    with pytest.raises(ValidationError, match="next to the question"):
        EvalSpec(passkey_depths=(0.5, 1.0))


def test_echo_model_scores_100_percent(tokenizer):
    gen = Generation(Engine(EchoKeyModel(tokenizer)), tokenizer, "cpu", batch_tokens=1000)
    res = evaluate_passkey(gen, [200, 400, 20], [0.0, 0.5, 0.9], 3, 99)
    m = res.metrics()
    assert m["overall"] == 1.0 and m["lengths"] == [200, 400] and m["units"] == 18
    assert m["skipped"][0]["length"] == 20
    assert len(m["cells"]) == 6 and all(c["accuracy"] == 1.0 and c["n"] == 3 for c in m["cells"])
    assert [(r["length"], r["n"], r["correct"]) for r in m["by_length"]] == [(200, 9, 9), (400, 9, 9)]
    assert len({r.key for r in res.records}) == 18


def test_random_model_runs_through_the_engine_and_batching_does_not_change_it(tokenizer):
    torch.set_num_threads(1)
    model = random_gpt(tokenizer.vocab_size)
    cells = ([200], [0.0, 0.9], 2, 0)
    a = evaluate_passkey(Generation(Engine(model), tokenizer, "cpu", batch_tokens=215), *cells)
    b = evaluate_passkey(Generation(Engine(model), tokenizer, "cpu", batch_tokens=10_000), *cells)
    m = a.metrics()
    assert 0.0 <= m["overall"] <= 1.0 and not math.isnan(m["overall"])
    assert [(c["length"], c["depth"]) for c in m["cells"]] == [(200, 0.0), (200, 0.9)]
    assert a.records == b.records
