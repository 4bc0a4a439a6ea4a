"""Eval lengths grid, dynamic-ntk's fixed-scale option, and batched greedy decoding."""

from __future__ import annotations

import pytest
import torch

from rlab.core.engine import Engine
from rlab.core.rope import inv_freq
from rlab.evals.lengths import default_grid, eval_lengths, longest_bpb_length
from rlab.evals.rope_eval import apply_eval_rope, fixed_scale
from rlab.spec.eval import EvalSpec
from rlab.spec.rope import RopeSpec
from tests.evals.conftest import random_gpt


def test_default_grid_from_half_l0_to_twice_the_target():
    assert default_grid(2048, 8192) == [1024, 2048, 4096, 8192, 16384]
    assert default_grid(1024, 1024) == [512, 1024, 2048]
    assert default_grid(256, 1000) == [128, 256, 512, 1000, 1024, 2000]  # T and 2T even off the powers of two
    spec = EvalSpec(extra_lengths=(3000,))
    assert eval_lengths(spec, 1024, 2048) == [512, 1024, 2048, 3000, 4096]
    assert eval_lengths(EvalSpec(lengths=(100, 50)), 1024, 2048) == [50, 100]
    assert longest_bpb_length(spec, 2048) == 4096 and longest_bpb_length(EvalSpec(lengths=(64,)), 2048) == 64


def test_dynamic_ntk_fixed_scale_is_its_frequencies_at_one_length():
    assert fixed_scale(4.0, 256, 1024) == 13.0  # s^2 - s + 1 at T = s * L0
    assert fixed_scale(4.0, 256, 100) == 1.0
    model = random_gpt(
        300, sequence_len=16, rope=RopeSpec(variant="dynamic-ntk", factor=4.0, original_len=16)
    )
    per_window = apply_eval_rope(model, EvalSpec(), 64)
    assert per_window["dynamic_ntk"] == "per_window" and per_window["scale_at_target_len"] == 13.0
    assert model.rope.variant.value == "dynamic-ntk"  # untouched
    expected = inv_freq(model.rope, model.config.head_dim, seq_len=48)
    record = apply_eval_rope(model, EvalSpec(dynamic_ntk="fixed", dynamic_ntk_len=48), 64)
    assert record["effective_scale"] == fixed_scale(4.0, 16, 48) == 9.0
    assert model.rope.variant.value == "ntk"
    for length in (8, 48, 200):  # the same frequencies at every window length
        assert torch.allclose(inv_freq(model.rope, model.config.head_dim, seq_len=length), expected)


def test_fixed_option_leaves_other_variants_alone():
    model = random_gpt(300, sequence_len=16, rope=RopeSpec(variant="yarn", factor=4.0))
    before = model.rope
    record = apply_eval_rope(model, EvalSpec(dynamic_ntk="fixed"), 64)
    assert model.rope == before and record["variant"] == "yarn"


@pytest.mark.parametrize("rope", [None, RopeSpec(variant="dynamic-ntk", factor=2.0, original_len=16)])
def test_batched_greedy_equals_one_prompt_at_a_time(rope):
    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=16, seed=7, rope=rope)
    engine = Engine(model)
    prompts = [[256, *range(i, i + 20)] for i in (3, 40, 90)]
    batched = engine.greedy(prompts, 6)
    for p, out in zip(prompts, batched):
        assert out == engine.generate(p, max_tokens=6, temperature=0.0)[0]
