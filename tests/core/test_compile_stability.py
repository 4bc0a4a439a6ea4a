"""A compiled training step compiles once: the rotary tables (and FlexAttention block masks) are built before
torch.compile traces the model (`GPT.precompute_tables`), shapes are static (`dynamic=False`), so step 2
runs the graphs of step 1. Built inside the trace, the tables were a mutation of the model there, and
step 2 recompiled. (`aot_eager`: AOTAutograd's graphs without code generation, seconds on a CPU.)"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from rlab.core.head_loss import prepare_for_compile
from tests.core.tiny_models import initialized_gpt


def _steps(precompute: bool) -> None:
    torch._dynamo.reset()
    model = initialized_gpt(sequence_len=64, n_layer=1, n_head=2)
    if precompute:
        model.precompute_tables(64, "cpu")
    prepare_for_compile()  # as the trainer does (train_model): else the test passes only after another compiled one
    compiled = torch.compile(model, backend="aot_eager", dynamic=False)
    x = torch.randint(0, 100, (2, 64))
    compiled(x, x).backward()  # step 1 compiles
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(2):
            compiled(x, x).backward()


def test_no_recompile_at_step_two_with_tables_built_first():
    _steps(precompute=True)


def test_tables_built_inside_the_trace_recompile_at_step_two():
    """The check above can fail: without the precomputation it does."""
    with pytest.raises(Exception, match="[Rr]ecompil"):
        _steps(precompute=False)
