"""A run that diverges without NaN stops as `diverged`; only healthy checkpoints are written (issue 42, findings
3 and 4), in one process on the tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from rlab.core.checkpoint_meta import read_meta, write_meta
from rlab.core.divergence import DivergenceWatch
from rlab.core.train import train
from rlab.errors import CheckpointError, Diverged, TrainingError
from rlab.paths import checkpoint_steps, meta_file
from tests.core.train_helpers import make_run_config, train_records

pytestmark = pytest.mark.usefixtures("one_thread")

HUGE_LR = {"warmup_steps": 0, "matrix_lr": 1e8, "embedding_lr": 1e8, "unembedding_lr": 1e8}


def test_a_run_whose_gradient_dies_stops_as_diverged_not_done(train_base, tmp_path):
    """Finding 3: at lr 1e8 the tiny model's grad norm is exactly 0.0 from step 2 on (no step non-finite, so no
    skip); it used to end `done`. Now the 5th dead step in a row stops it, recorded as diverged (step 1, a fresh
    model's uniform guess at full LR, counts as the first)."""
    run_dir = tmp_path / "run"
    cfg = make_run_config(train_base, run_dir, steps=40, lr=HUGE_LR, diverged_after=5)
    with pytest.raises(
        Diverged, match=r"at step 5: diverged \(5 steps in a row since step 1; last: loss 1"
    ) as info:
        train(cfg)
    assert "--force" in (info.value.hint or "")  # no checkpoint of this run is older than the dead steps
    steps = train_records(run_dir)
    assert [r["grad_norm"] for r in steps][1:] == [0.0] * 4 and len(steps) == 5
    (failed,) = train_records(run_dir, "failed")
    assert failed["kind"] == "diverged" and failed["error"].startswith("Stopped d2 at step 5: diverged")
    assert not train_records(run_dir, "done")


def test_the_divergence_rule_counts_dead_steps_in_a_row():
    watch = DivergenceWatch(vocab_size=512, after=3, max_loss=None, warmup_steps=2, run_start_step=0)
    uniform = math.log(512)

    def step(n: int, loss: float, norm: float = 1.0) -> str | None:
        return watch.check({"step": n, "loss": loss, "grad_norm": norm})

    assert step(1, uniform) is None and step(2, uniform) is None  # ln(vocab) in the LR warmup: a fresh model
    assert (
        step(3, 5.0, 0.0) is None and step(4, 5.0, float("nan")) is None
    )  # a skipped step is another rule's
    assert watch.streak == 1 and step(5, 3.0) is None and watch.streak == 0  # a live step ends the streak
    assert step(6, uniform + 1e-4) is None and step(7, 30.0) is None
    assert step(8, 5.0, 0.0) == "grad norm exactly 0 (loss 5.0000)" and watch.first_dead == 6
    assert "2 x ln(vocab)" in (watch.dead_reason({"step": 9, "loss": 13.0, "grad_norm": 1.0}) or "")
    assert DivergenceWatch(512, None, None, 0, 0).check({"step": 1, "loss": 99.0, "grad_norm": 0.0}) is None


def _explode_at(forward: int):
    """Multiplies lm_head by 1e37 before the given forward pass: finite weights of ~1e37, as lr 1e37 left them."""
    count = [0]

    def attach(model):
        def pre_hook(module, args):
            count[0] += 1
            if count[0] == forward:
                with torch.no_grad():
                    module.lm_head.weight.mul_(1e37)

        model.register_forward_pre_hook(pre_hook)

    return attach


def test_exploded_weights_are_never_checkpointed_and_the_hint_names_the_newest_healthy_step(
    train_base, tmp_path
):
    """Finding 4: exploded (finite) weights were saved with `replica_param_checksums: [null, null]`, and resuming
    failed on that meta. Now the save refuses, the hint names the newest healthy step, and resume works."""
    ckpt = train_base / "base_checkpoints" / "d2"
    cfg = make_run_config(train_base, tmp_path / "run", steps=8, save_every=1, grad_clip=None)
    with pytest.raises(TrainingError, match=r"Refusing to save step 4 of d2: unhealthy weights") as info:
        train(cfg, on_model=_explode_at(4))
    assert "lm_head.weight (|w| up to" in info.value.message
    assert "resume from step 3, the newest healthy checkpoint: --resume --resume-from 3" in (
        info.value.hint or ""
    )
    assert checkpoint_steps(ckpt) == [1, 2, 3] and not meta_file(ckpt, 4).exists()
    for step in (1, 2, 3):
        checksums = read_meta(ckpt, step).replica_param_checksums
        assert checksums and all(math.isfinite(c) for c in checksums)
    train(make_run_config(train_base, tmp_path / "run", steps=8, save_every=4, resume=True))
    assert checkpoint_steps(ckpt)[-1] == 8


def test_a_meta_that_would_not_read_back_is_never_written(train_base, tmp_path):
    ckpt = train_base / "base_checkpoints" / "d2"
    train(make_run_config(train_base, tmp_path / "run", steps=1, save_every=1))
    meta = read_meta(ckpt, 1).model_copy(update={"replica_param_checksums": [float("inf"), 1.0]})
    with pytest.raises(CheckpointError, match="would not read back"):
        write_meta(ckpt, 2, meta)
    assert not meta_file(ckpt, 2).exists()
