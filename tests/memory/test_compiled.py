"""torch.compile's saved tensors, counted on the CPU: the depth extrapolation (exact against a compile at
the full depth, for alike blocks and for nanochat-2026's alternating ones), and a model with no graph break."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rlab.core.gpt import GPT
from rlab.memory.compiled import _saved_at_depth, compiled_saved, layer_period, probe_depths
from rlab.memory.shape import TrainShape
from tests.memory.conftest import small_config


def _shape(n_layer: int, seq_len: int = 128, **config) -> TrainShape:
    return TrainShape(
        config=small_config(n_layer=n_layer, n_embd=64, seq_len=seq_len, **config),
        seq_len=seq_len,
        device_batch_size=2,
    )


def test_probe_depths_repeat_the_full_depths_layout():
    """One period of blocks apart, from the smallest depth with the full depth's remainder."""
    assert layer_period(_shape(20).config) == 1
    assert (
        layer_period(replace(_shape(20).config, architecture="nanochat-2026")) == 2
    )  # value embeds alternate
    windows = replace(_shape(20).config, architecture="nanochat-2026", window_pattern="SSSL")
    assert layer_period(windows) == 4
    assert probe_depths(20, 1) == (1, 2) and probe_depths(2, 1) == (1, 2) and probe_depths(1, 1) == (1, 2)
    assert probe_depths(20, 4) == (4, 8) and probe_depths(21, 4) == (1, 5) and probe_depths(6, 2) == (2, 4)


@pytest.mark.slow  # each compile takes seconds on a shared 2-core CPU
def test_two_depths_give_the_full_depths_count():
    """Blocks are alike, so the count at depth 1 and 2 extrapolates exactly to the full depth."""
    shape = _shape(n_layer=5)
    estimate = compiled_saved(shape)
    assert estimate.per_layer > 0 and estimate.outside_blocks > 0
    assert estimate.total == _saved_at_depth(shape, 5)


@pytest.mark.slow
def test_alternating_blocks_extrapolate_exactly():
    """nanochat-2026: value embeddings on every other layer, short and long windows (S = 128 < L = 256):
    depths 2 and 4 give the count of 6 layers exactly."""
    shape = _shape(n_layer=6, seq_len=256, architecture="nanochat-2026", window_pattern="SL")
    estimate = compiled_saved(shape)
    assert estimate.total == _saved_at_depth(shape, 6)
    assert _saved_at_depth(shape, 2) - _saved_at_depth(shape, 1) != estimate.per_layer  # blocks differ


@pytest.mark.slow
def test_checkpointed_blocks_extrapolate_exactly():
    """Every other block checkpointed: a period of two blocks, and the count of 5 layers is exact."""
    shape = _shape(n_layer=5).model_copy(update={"activation_checkpointing": "every-2"})
    estimate = compiled_saved(shape)
    assert estimate.total == _saved_at_depth(shape, 5)
    assert estimate.total < compiled_saved(_shape(n_layer=5)).total


@pytest.mark.slow
def test_the_model_compiles_as_one_graph():
    """No graph break: the device-type switch the planner uses (rlab.core.target_device) must stay
    traceable, and so must everything else in the forward."""

    shape = _shape(n_layer=2)
    model = GPT(shape.config)
    x = torch.randint(0, 512, (2, 128))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x, x)
    torch._dynamo.reset()
    assert explained.graph_break_count == 0, explained.break_reasons
