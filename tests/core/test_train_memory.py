"""What the trainer does for memory and speed besides the model: the attention-kernel line in train.log, the
garbage collector frozen after the first step (and given back after the run), one compile for the run."""

from __future__ import annotations

import gc
import logging

import pytest
import torch._dynamo

from rlab.core.train import train
from tests.core.train_helpers import make_run_config, train_records

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_log_names_the_attention_kernel_and_gc_is_frozen_after_the_first_step(
    train_base, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG, logger="rlab.core.train")
    train(make_run_config(train_base, tmp_path / "run", steps=3, sample_every="never"))
    lines = [r.getMessage() for r in caplog.records if r.name == "rlab.core.train"]
    assert "attention: SDPA flash (CPU kernel) for full-context layers" in lines
    frozen = [line for line in lines if line.startswith("gc: ")]
    assert len(frozen) == 1 and int(frozen[0].split()[1]) > 0
    assert gc.get_freeze_count() == 0  # given back when the run ends


@pytest.mark.slow
def test_a_compiled_run_compiles_once(train_base, tmp_path, caplog):
    """torch.compile (inductor) on a CPU: steps 2 and 3 run step 1's graphs (a recompile would raise)."""
    torch._dynamo.reset()
    caplog.set_level(logging.INFO, logger="rlab.core.train")
    with torch._dynamo.config.patch(error_on_recompile=True):
        train(make_run_config(train_base, tmp_path / "run", steps=3, compile=True, sample_every="never"))
    assert not [r for r in caplog.records if "torch.compile failed" in r.getMessage()]
    assert len(train_records(tmp_path / "run")) == 3
