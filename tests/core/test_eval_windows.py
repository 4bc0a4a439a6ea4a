"""Attention windows at eval lengths past the training length: more length means more context (by default)."""

from __future__ import annotations

import pytest
import torch

from rlab.core.architecture import attention_reach, eval_window_sizes, window_sizes
from rlab.core.blocks import KVCache
from rlab.evals.rope_eval import apply_eval_rope
from rlab.evals.windows import NO_WINDOWS, apply_eval_windows, lengths_in_use, window_setting
from rlab.spec.eval import EvalSpec
from rlab.spec.rope import RopeSpec
from tests.evals.conftest import random_gpt


def test_window_sizes_per_rule_beyond_the_training_length():
    trained = window_sizes("SSSL", 4, 1024)
    assert trained == [256, 256, 256, 1024]
    for rule in ("extend", "scale", "capped"):  # up to the training length every rule is the trained windows
        assert eval_window_sizes("SSSL", 4, 1024, 1024, 1024, rule) == trained
        assert eval_window_sizes("SSSL", 4, 1024, 1024, 300, rule) == trained
    assert eval_window_sizes("SSSL", 4, 1024, 1024, 4096, "extend") == [256, 256, 256, 4096]
    assert eval_window_sizes("SSSL", 4, 1024, 1024, 4096, "scale") == [1024, 1024, 1024, 4096]
    assert eval_window_sizes("SSSL", 4, 1024, 1024, 4096, "capped") == trained
    # the base at L0 = 256: its full-context layers extend too
    assert eval_window_sizes("SSSL", 4, 256, 256, 1024, "extend") == [128, 128, 128, 1024]
    # `rope.windows: fixed` continued at 1024 with the windows of 256: no layer spans its training row, so
    # there is no full-context layer to extend and fixed windows stay fixed
    assert eval_window_sizes("SSSL", 4, 1024, 256, 2048, "extend") == [128, 128, 128, 256]
    assert eval_window_sizes("SSSL", 4, 1024, 256, 2048, "scale") == [128, 128, 128, 256]


def test_attention_reach_names_a_capped_context():
    assert attention_reach([256, 1024], 1024) is None  # 1023 back is within the full-context layer
    assert attention_reach([256, 1024], 2048) == 1024
    assert attention_reach([256, 2048], 2048) is None
    assert attention_reach([None, None], 10**6) is None  # no windows at all


def _windowed(sequence_len: int = 16, seed: int = 3, rope: RopeSpec | None = None):
    model = random_gpt(300, sequence_len=sequence_len, seed=seed, architecture="nanochat-2026", rope=rope)
    model.config.window_pattern = "SL"
    model.set_rope(model.rope)  # recompute the trained windows for the pattern
    return model.eval()


def test_extend_lets_a_query_see_past_the_training_length_and_capped_does_not():
    torch.manual_seed(0)
    model = _windowed()
    assert model.window_sizes == [128, 16]  # short window rounded up to 128 (nanochat), long = sequence_len
    x = torch.randint(0, 300, (1, 40))
    far = x.clone()
    far[0, 2] = (x[0, 2] + 1) % 300  # a token 37 back from the last position
    with torch.no_grad():
        model.set_eval_windows("capped")  # layer 2 sees 16 back, layer 1 only 128 (= everything here)
        capped = model(x)[0, -1], model(far)[0, -1]
        model.set_eval_windows("extend")
        extended = model(x)[0, -1], model(far)[0, -1]
    assert model.windows_at(40) == [128, 40]
    assert not torch.allclose(*extended)  # the far token reaches the last position through every layer
    assert not torch.equal(capped[0], extended[0])  # capping changes what the model sees
    model.config.window_pattern = "L"  # two layers of 16: capped, the last position's receptive field is 32
    model.set_rope(model.rope)
    with torch.no_grad():
        model.set_eval_windows("capped")
        torch.testing.assert_close(model(x)[0, -1], model(far)[0, -1], rtol=0, atol=0)
        model.set_eval_windows("extend")
        assert not torch.allclose(model(x)[0, -1], model(far)[0, -1])


def test_extend_equals_a_model_trained_at_the_eval_length():
    """With plain rope the windows are the only thing sequence_len changes: a model extended to 40 tokens is
    exactly the same model configured for 64."""
    short = _windowed(sequence_len=16)
    long = _windowed(sequence_len=64)
    long.load_state_dict(short.state_dict())
    short.set_eval_windows("extend")
    x = torch.randint(0, 300, (2, 40))
    with torch.no_grad():
        torch.testing.assert_close(short(x), long(x), rtol=0, atol=0)


def test_kv_cache_decoding_sees_the_same_windows_as_one_forward():
    model = _windowed()
    model.set_eval_windows("extend")
    x = torch.randint(0, 300, (1, 40))
    with torch.no_grad():
        full = model(x)[0]
        cache = KVCache(1, 2, model.config.head_dim, 2, "cpu", torch.float32)
        steps = [model(x[:, :30], kv_cache=cache)[0, -1]]
        for t in range(30, 40):
            steps.append(model(x[:, t : t + 1], kv_cache=cache)[0, -1])
    torch.testing.assert_close(torch.stack(steps[1:]), full[30:], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(steps[0], full[29], rtol=1e-4, atol=1e-4)


def test_apply_eval_windows_records_the_rule_and_capped_lengths():
    model = _windowed()
    record = apply_eval_windows(model, EvalSpec(attention_windows="capped"), [8, 16, 64])
    assert model.eval_windows == "capped" and record.rule == "capped" and record.windowed
    caps = {w.length: w.capped_at for w in record.lengths}
    assert caps == {8: None, 16: None, 64: None}  # the short layer's 128 still spans 64 tokens
    model.config.window_pattern = "L"
    model.set_rope(model.rope)
    record = apply_eval_windows(model, EvalSpec(attention_windows="capped"), [16, 64])
    assert {w.length: (w.windows, w.capped_at) for w in record.lengths} == {
        16: ([16, 16], None),
        64: ([16, 16], 16),
    }
    record = apply_eval_windows(model, EvalSpec(), [64])  # the default: extend
    assert (
        record.rule == "extend"
        and record.lengths[0].windows == [64, 64]
        and record.lengths[0].capped_at is None
    )
    assert window_setting(model) == {"attention_windows": "extend"}
    plain = random_gpt(300, sequence_len=16)  # nanochat-2025: no windows, nothing is ever capped
    record = apply_eval_windows(plain, EvalSpec(attention_windows="capped"), [64])
    assert not record.windowed and record.lengths[0].windows is None and record.lengths[0].capped_at is None
    assert window_setting(plain) == {"attention_windows": NO_WINDOWS}


def test_lengths_in_use_covers_every_long_context_eval():
    spec = EvalSpec(passkey_lengths=(300,), copy_lengths=(48, 64))
    assert lengths_in_use(spec, [16, 32]) == [16, 32, 48, 64, 300]


@pytest.mark.parametrize("windows", ["scale", "fixed"])
def test_dynamic_ntk_fixed_keeps_the_trained_windows(windows):

    model = _windowed(rope=RopeSpec(variant="dynamic-ntk", factor=4.0, original_len=4, windows=windows))
    before = model.window_sizes
    apply_eval_rope(model, EvalSpec(dynamic_ntk="fixed"), 16)
    assert (
        model.rope.variant.value == "ntk" and model.rope.windows == windows and model.window_sizes == before
    )
