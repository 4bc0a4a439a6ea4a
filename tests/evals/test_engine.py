"""Generation engine: per-row sampling, greedy == full recompute with the KV cache, clear errors."""

from __future__ import annotations

import pytest
import torch

from rlab.core.engine import Engine, sample_next
from rlab.errors import EvalError
from rlab.spec.rope import RopeSpec
from tests.evals.conftest import random_gpt


def _greedy_by_recompute(model, prompt, n):
    ids = list(prompt)
    out = []
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]))[0, -1]
            nxt = int(logits.argmax())
            ids.append(nxt)
            out.append(nxt)
    return out


@pytest.mark.parametrize("rope", [None, RopeSpec(variant="yarn", factor=4.0)])
def test_kv_cache_generation_equals_full_recompute_past_training_length(rope):
    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=16, seed=3, rope=rope)
    prompt = [256] + list(range(10, 30))  # 21 tokens: already past sequence_len=16
    n = 20  # and decode well past the cached length
    cached = Engine(model).generate(prompt, num_samples=2, max_tokens=n, temperature=0.0)
    expected = _greedy_by_recompute(model, prompt, n)
    assert cached[0] == expected and cached[1] == expected


def test_each_row_samples_its_own_first_token():
    torch.set_num_threads(1)
    model = random_gpt(300, seed=1)
    engine = Engine(model)
    rows = engine.generate([256, 5, 6, 7], num_samples=8, max_tokens=3, temperature=1.0, seed=123)
    firsts = [r[0] for r in rows]
    assert len(set(firsts)) > 1, firsts
    assert rows == engine.generate([256, 5, 6, 7], num_samples=8, max_tokens=3, temperature=1.0, seed=123)


def test_top_k_one_is_greedy_and_stop_tokens_end_rows():
    model = random_gpt(300, seed=2)
    engine = Engine(model)
    greedy = engine.generate([256, 1, 2], max_tokens=6, temperature=0.0)[0]
    assert engine.generate([256, 1, 2], max_tokens=6, temperature=0.7, top_k=1)[0] == greedy
    stopped = engine.generate([256, 1, 2], max_tokens=6, temperature=0.0, stop_tokens=[greedy[1]])[0]
    assert stopped == greedy[: greedy.index(greedy[1]) + 1]


def test_nan_logits_raise_clear_error_naming_tag_and_step():
    model = random_gpt(300, seed=0)
    with torch.no_grad():
        model.lm_head.weight[7, 0] = float("nan")
    with pytest.raises(EvalError, match=r"d0-rope step 7: non-finite logits at generation step 0"):
        Engine(model, name="d0-rope step 7").generate([256, 1, 2], num_samples=2, max_tokens=4)


def test_all_zero_distribution_raises():
    logits = torch.tensor([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0]])
    with pytest.raises(EvalError, match=r"m: the sampling distribution at generation step 5"):
        sample_next(logits, None, temperature=1e-300, top_k=None, name="m", step=5)
    with pytest.raises(EvalError, match="non-finite"):
        sample_next(torch.tensor([[float("inf"), 0.0]]), None, 1.0, None)
