"""The training plan against reality on a CPU: saved bytes and the peak of real runs at small shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlab.core import distributed, head_loss
from rlab.core.gpt import GPT
from rlab.core.tokenizer import Tokenizer
from rlab.core.train import train
from rlab.memory.checkpointing import longest_rows
from rlab.memory.plan import batch_candidates, peak_with_ddp, plan_training
from rlab.memory.shape import TrainShape
from rlab.memory.trace import trace_step
from tests.core.train_helpers import make_run_config
from tests.memory.conftest import profiled_peak, small_config


def _shape(dtype: str = "float32", batch: int = 4, accum: int = 1, **config) -> TrainShape:
    return TrainShape(
        config=small_config(**config),
        seq_len=config.get("seq_len", 256),
        device_batch_size=batch,
        grad_accum_steps=accum,
        dtype=dtype,
        device="cpu",
    )


@pytest.mark.parametrize(
    ("dtype", "checkpointing", "n_layer"),
    [("float32", "off", 2), ("bfloat16", "off", 2), ("float32", "all", 2), ("bfloat16", "every-2", 3)],
)
def test_traced_saved_bytes_equal_what_hooks_see_in_a_real_forward(dtype, checkpointing, n_layer):
    """The fake trace counts exactly the storages a real forward saves (independent count, by storage),
    with blocks checkpointed (they keep their inputs) as without."""

    shape = _shape(dtype, n_layer=n_layer).with_checkpointing(checkpointing)
    traced = trace_step(shape)
    torch.manual_seed(0)
    model = GPT(shape.config)
    model.init_weights()
    model.set_activation_checkpointing(checkpointing)
    x = torch.randint(0, shape.config.vocab_size, (shape.device_batch_size, shape.seq_len))
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        seen.setdefault(st.data_ptr(), st.nbytes())
        return t

    cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), cast:
        model(x, x)
    assert traced.activations > 0
    assert sum(seen.values()) == traced.activations + traced.weight_copies
    assert set(traced.saved) == {"embed", "layers", "head"}
    if checkpointing != "off":  # a checkpointed block keeps less than a plain one
        assert traced.saved["layers"] < trace_step(shape.with_checkpointing("off")).saved["layers"]


@pytest.mark.parametrize(("dtype", "accum"), [("float32", 1), ("bfloat16", 2)])
def test_planned_peak_is_within_10_percent_of_a_real_training_run(
    memory_base: Path, tmp_path: Path, dtype, accum
):
    """The plan's peak vs the CPU allocator's peak over a real two-step `train()` (model, optimizer, data
    loader, checkpoint save and all), measured with torch's profiler."""

    n_layer, n_embd, seq, batch = 2, 128, 256, 8
    cfg = make_run_config(
        memory_base,
        tmp_path / "run",
        init={"kind": "scratch", "model": {"n_layer": n_layer, "n_embd": n_embd, "n_head": 2}},
        steps=2,
        seq_len=seq,
        device_batch_size=batch,
        total_batch_size=batch * seq * accum,
        dtype=dtype,
        eval_every="never",
    )
    head_loss._CPU_SCRATCH.clear()  # the CPU head keeps its scratch between calls: start as a fresh process does
    measured = profiled_peak(lambda: train(cfg))
    vocab = Tokenizer.from_directory(memory_base / "tokenizer").vocab_size
    shape = _shape(
        dtype, batch=batch, accum=accum, n_layer=n_layer, n_embd=n_embd, vocab_size=vocab, seq_len=seq
    )
    planned = plan_training(shape, suggest=False).peak_gib * 2**30
    assert abs(planned - measured) <= 0.10 * measured, (planned, measured)


def test_ddp_buckets_follow_the_trainers_ddp_options(monkeypatch):

    trace = trace_step(_shape())
    assert peak_with_ddp(trace.peak, trace, nproc=1) == (trace.peak, 0)
    monkeypatch.setitem(distributed.DDP_OPTIONS, "gradient_as_bucket_view", False)
    assert peak_with_ddp(trace.peak, trace, nproc=2) == (trace.peak + trace.gradients, trace.gradients)
    monkeypatch.setitem(distributed.DDP_OPTIONS, "gradient_as_bucket_view", True)
    peak, extra = peak_with_ddp(trace.peak, trace, nproc=2)
    assert extra == 0
    assert peak == trace.peak - trace.peak_parts.get("gradients", 0) + trace.gradients


def test_batch_candidates_keep_the_tokens_per_step():
    shape = _shape(batch=8, accum=1)
    assert batch_candidates(shape) == [(4, 2), (2, 4), (1, 8)]
    assert batch_candidates(_shape(batch=6, accum=2)) == [(4, 3), (3, 4), (2, 6), (1, 12)]


def test_a_plan_that_does_not_fit_names_the_largest_batch_that_does():
    shape = _shape(batch=8)
    full = plan_training(shape, suggest=False).peak_gib
    quarter = plan_training(shape.with_batch(2, 4), suggest=False).peak_gib
    memory = (full + quarter) / 2 / 0.9  # the budget (90%) lies between the two peaks
    plan = plan_training(shape, memory)
    assert not plan.fits
    s = plan.suggestion
    assert s is not None and s.device_batch_size in (4, 2)
    assert s.device_batch_size * s.grad_accum_steps == 8
    assert s.peak_gib <= plan.budget_gib


def test_sharded_optimizer_state_is_one_ranks_share():
    """As rank 0 of 2 (a fake process group), the optimizers keep about half the state they keep alone."""
    sharded = trace_step(_shape().model_copy(update={"nproc": 2}))
    whole = trace_step(_shape().model_copy(update={"nproc": 2, "shard_optimizer": False}))
    assert whole.optimizer > 0
    assert 0.3 * whole.optimizer < sharded.optimizer < 0.7 * whole.optimizer


def test_windowed_layers_plan_the_cuda_kernel():
    """nanochat-2026 windows: on CUDA FlexAttention keeps O(T) for the backward; the CPU's dense mask
    through SDPA keeps the T x T attention weights. The plan of the CUDA path counts the former."""
    config = small_config(
        n_layer=2, n_embd=128, seq_len=512, architecture="nanochat-2026", window_pattern="SL"
    )
    shape = TrainShape(config=config, seq_len=512, device_batch_size=2, compile=False)
    on_gpu = trace_step(shape)
    on_cpu = trace_step(shape.model_copy(update={"device": "cpu"}))
    assert on_gpu.saved["layers"] < on_cpu.saved["layers"]


def test_longest_rows_grow_with_the_gpu_and_with_checkpointing():
    """Per GPU size, checkpointing every block trains longer rows than none, and a larger GPU longer still."""

    shape = _shape(seq_len=2048, n_layer=2, n_embd=128).with_batch(2, 1)
    rows = longest_rows(shape, sizes=(0.25, 1.0))
    assert [r.gpu_memory_gib for r in rows] == [0.25, 1.0]
    small, large = rows
    assert small.without_checkpointing is not None and large.without_checkpointing is not None
    assert small.with_checkpointing is not None and large.with_checkpointing is not None
    assert small.without_checkpointing < small.with_checkpointing
    assert small.without_checkpointing < large.without_checkpointing
    assert all(n % 1024 == 0 for r in rows for n in (r.without_checkpointing, r.with_checkpointing))
