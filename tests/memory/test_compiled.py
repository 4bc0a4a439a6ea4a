"""torch.compile's saved tensors, counted on the CPU: the depth extrapolation, and a model with no graph break."""

from __future__ import annotations

import pytest
import torch

from rlab.memory.compiled import _saved_at_depth, compiled_saved
from rlab.memory.shape import TrainShape
from tests.memory.conftest import small_config

pytestmark = pytest.mark.slow  # each compile takes seconds on a shared 2-core CPU


def _shape(n_layer: int) -> TrainShape:
    return TrainShape(
        config=small_config(n_layer=n_layer, n_embd=64, seq_len=128), seq_len=128, device_batch_size=2
    )


def test_two_depths_give_the_full_depths_count():
    """Blocks are alike, so the count at depth 2 and 3 extrapolates exactly to the full depth."""
    shape = _shape(n_layer=5)
    estimate = compiled_saved(shape)
    assert estimate.per_layer > 0 and estimate.outside_blocks > 0
    assert estimate.total == _saved_at_depth(shape, 5)


def test_the_model_compiles_as_one_graph():
    """No graph break: the device-type switch the planner uses (rlab.core.target_device) must stay
    traceable, and so must everything else in the forward."""
    from rlab.core.gpt import GPT, GPTConfig

    shape = _shape(n_layer=2)
    model = GPT(GPTConfig.from_dict(shape.config))
    x = torch.randint(0, 512, (2, 128))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x, x)
    torch._dynamo.reset()
    assert explained.graph_break_count == 0, explained.break_reasons
