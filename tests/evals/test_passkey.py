"""Passkey: prompt construction at the requested depth, scoring, and a key-echoing model scores 100%."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from rlab.core.engine import Engine
from rlab.errors import EvalError
from rlab.evals.passkey import NEEDLE, build_prompt, draw_key, evaluate_passkey, first_number
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

    def forward(self, idx, targets=None, kv_cache=None, loss_reduction="mean"):
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
        return logits


@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_prompt_holds_key_at_depth(tokenizer, depth):
    key = draw_key(1234, 0)
    p = build_prompt(tokenizer, 400, depth, key)
    assert len(p.tokens) <= 400 and p.tokens[0] == tokenizer.bos_token_id
    text = tokenizer.decode(p.tokens)
    assert NEEDLE.format(key=key) in text and text.endswith("What is the secret number? It is")
    needle_len = len(tokenizer.encode(NEEDLE.format(key=key)))
    filler = p.filler_end - p.filler_start - needle_len
    unit = len(tokenizer.encode("The river runs to the sea. The hills stay where they are. Birds cross the sky and the day goes on. "))
    assert abs((p.needle_start - p.filler_start) - depth * filler) <= unit / 2 + 1
    assert len(p.tokens) > 400 - unit - 1  # the filler fills the length up to one sentence


def test_too_short_length_is_an_error(tokenizer):
    with pytest.raises(EvalError, match="too short"):
        build_prompt(tokenizer, 10, 0.5, "12345")


def test_keys_are_seeded_and_scoring_reads_first_number():
    assert draw_key(7, 3) == draw_key(7, 3) and len(draw_key(7, 3)) == 5
    assert first_number(" 48213. Remember") == "48213" and first_number("none") is None


def test_echo_model_scores_100_percent(tokenizer):
    res = evaluate_passkey(Engine(EchoKeyModel(tokenizer)), tokenizer, [200, 400, 20], [0.0, 0.5, 1.0], 3, 99, "cpu")
    m = res.metrics()
    assert m["overall"] == 1.0 and m["lengths"] == [200, 400]
    assert m["skipped"][0]["length"] == 20
    assert len(m["cells"]) == 6 and all(c["accuracy"] == 1.0 and c["n"] == 3 for c in m["cells"])


def test_random_model_runs_through_the_engine(tokenizer):
    torch.set_num_threads(1)
    res = evaluate_passkey(Engine(random_gpt(tokenizer.vocab_size)), tokenizer, [150], [0.0, 1.0], 2, 0, "cpu")
    m = res.metrics()
    assert 0.0 <= m["overall"] <= 1.0 and not math.isnan(m["overall"])
    assert [(c["length"], c["depth"]) for c in m["cells"]] == [(150, 0.0), (150, 1.0)]
