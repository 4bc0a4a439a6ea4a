"""The evals' plan against real CPU runs: the KV cache and the peaks of BPB and of a prefill."""

from __future__ import annotations

import torch

from rlab.core.bpb import score_tokens
from rlab.core.engine import Engine
from rlab.core.gpt import GPT
from rlab.memory.eval_plan import EvalShape, eval_shape_from, plan_evals, plans_at_multiples
from tests.memory.conftest import profiled_peak, small_config


def _shape() -> EvalShape:
    """A 2-layer tag trained at 128, planned as `rlab memory --eval` plans it, at 4 x that length on the CPU."""
    return eval_shape_from(small_config(), train_seq_len=128, longest=512, dtype="float32", device="cpu")


def _model(shape: EvalShape):

    torch.manual_seed(0)
    model = GPT(shape.config)
    model.init_weights()
    return model.eval()


def test_eval_plan_matches_real_bpb_and_prefill_runs():

    shape = _shape()
    plan = plan_evals(shape)
    rows, L, V = plan.bpb.rows, shape.longest, shape.config.vocab_size
    assert rows == shape.batch_tokens // L == plan.prefill.rows
    token_bytes = torch.ones(V, dtype=torch.long)

    def bpb() -> None:
        model = _model(shape)
        x = torch.randint(0, V, (rows, L))
        y = torch.full((rows, L), -1, dtype=torch.long)
        y[:, L - shape.block :] = torch.randint(0, V, (rows, shape.block))
        score_tokens(model, x, y, token_bytes)  # what evaluate_bpb_blocks runs per batch

    cache_bytes = []

    def prefill() -> None:
        model = _model(shape)
        engine = Engine(model)
        with torch.no_grad():
            cache = engine._new_cache(rows, L, torch.device("cpu"))
            engine.prefill(torch.randint(0, V, (rows, L - shape.answer_tokens)), cache)
        cache_bytes.append(sum(t.untyped_storage().nbytes() for t in cache._k + cache._v))

    gib = 2**30
    for planned, measured in (
        (plan.bpb.peak_gib, profiled_peak(bpb)),
        (plan.prefill.peak_gib, profiled_peak(prefill)),
    ):
        assert abs(planned * gib - measured) <= 0.10 * measured, (planned * gib, measured)
    assert round(cache_bytes[0] / gib, 3) == plan.prefill.kv_cache_gib


def test_longer_eval_lengths_are_each_planned():
    """2, 4 and 8 x the training length, each planned against the GPU."""

    plans = plans_at_multiples(_shape(), 80)
    assert [p.shape.longest for p in plans] == [256, 512, 1024] and all(p.fits for p in plans)
    assert [p.bpb.rows for p in plans] == [4, 2, 1]  # batch_tokens 1024 // length
    assert not any(p.fits for p in plans_at_multiples(_shape(), 0.001))
