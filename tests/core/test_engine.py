"""Generation engine: per-row sampling, greedy == full recompute with the KV cache, clear errors."""

from __future__ import annotations

import pytest
import torch

from rlab.core.blocks import KVCache
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


def _lm_head_shapes(model) -> list[tuple[int, ...]]:
    shapes: list[tuple[int, ...]] = []
    model.lm_head.register_forward_hook(lambda mod, args, out: shapes.append(tuple(out.shape)))
    return shapes


@pytest.mark.parametrize("architecture", ["nanochat-2025", "nanochat-2026"])
def test_prefill_computes_the_last_positions_logits_only_and_tokens_are_unchanged(architecture):
    """The prompt's logits are (B, 1, V): the lm_head never sees more than one position per row, and the
    greedy tokens are those of recomputing the full forward (every position's logits) at each step."""
    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=64, seed=5, architecture=architecture)
    shapes = _lm_head_shapes(model)
    prompts = [[256] + list(range(i, i + 40)) for i in (3, 50, 90)]
    out = Engine(model).greedy(prompts, max_tokens=12)
    padded = model.config.padded_vocab_size
    assert shapes[0] == (3, 1, padded)  # the prefill
    assert set(shapes) == {(3, 1, padded)}  # and every decoding step
    shapes.clear()
    assert out == [_greedy_by_recompute(model, p, 12) for p in prompts]
    sampled = Engine(model).generate(prompts[0], num_samples=2, max_tokens=5, temperature=0.0)
    assert sampled == [out[0][:5], out[0][:5]]


def test_the_kv_cache_keeps_the_dtype_the_keys_come_in():
    """fp32 without autocast (a CPU eval), bf16 under autocast (a GPU eval runs under bf16 autocast)."""

    model = random_gpt(300, sequence_len=64, seed=5)
    for amp, dtype in ((False, torch.float32), (True, torch.bfloat16)):
        cache = KVCache(2, 2, model.config.head_dim, 2, "cpu", seq_len=30)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            model(torch.randint(0, 300, (2, 20)), kv_cache=cache, last_logits=True)
        assert cache.dtype == dtype
        assert {t.dtype for t in cache._k + cache._v} == {dtype}
        assert cache._k[0].shape[2] >= 30  # room for the planned length from the first insert
