"""Fixtures for the memory-plan tests: small shapes, a profiled real run, one torch thread."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from rlab.core.gpt_config import GPTConfig

D20_META = Path(__file__).resolve().parents[1] / "fixtures" / "nanochat_d20" / "meta_021400.json"


@pytest.fixture(autouse=True)
def _one_thread():
    """Two cores are shared by everyone: keep torch to one intra-op thread in these tests."""

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def memory_base(train_base: Path) -> Path:
    """A base dir over the shared tiny corpus and tokenizer (read-only), with its own checkpoints."""
    return train_base


def small_config(
    n_layer: int = 2, n_embd: int = 128, vocab_size: int = 512, seq_len: int = 256, **more
) -> GPTConfig:
    heads = max(1, n_embd // 64)
    return GPTConfig(
        sequence_len=seq_len,
        vocab_size=vocab_size,
        n_layer=n_layer,
        n_head=heads,
        n_kv_head=heads,
        n_embd=n_embd,
        **{"architecture": "nanochat-2025", **more},
    )


def profiled_peak(fn) -> int:
    """The largest total of live bytes the CPU allocator reports while `fn()` runs (torch's profiler:
    every allocation and free made through the CPU allocator, in order). Allocations from before the
    profiler started are not seen, so build everything inside `fn`."""
    import torch  # noqa: PLC0415 - `torch` is also a local name

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        peak = max(peak, live)
    assert events, "the profiler reported no CPU allocation"
    del torch
    return peak
