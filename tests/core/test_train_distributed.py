"""torchrun with 2 CPU processes (gloo): global loss, identical replicas, resume at another world size."""

from __future__ import annotations

import pytest
import torch

from rlab.core.checkpoint import delete_checkpoint
from rlab.core.checkpoint_meta import read_meta
from rlab.core.train import train
from rlab.paths import checkpoint_steps
from tests.core.train_helpers import SimulatedCrash, crash_after, make_run_config, torchrun, train_records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


def test_two_processes_log_global_loss_and_stay_in_sync_then_resume_with_one(train_base, tmp_path):
    run_dir = tmp_path / "run"
    cfg = make_run_config(train_base, run_dir, steps=8, save_every=4, eval_every=4, eval_tokens=512)
    torchrun(cfg, tmp_path / "run.json")
    recs = train_records(run_dir)
    assert [r["step"] for r in recs] == list(range(1, 9))
    for r in recs:  # the logged loss is the mean of the ranks' local losses
        assert len(r["rank_losses"]) == 2
        assert r["loss"] == pytest.approx(sum(r["rank_losses"]) / 2, rel=1e-6)
        assert r["tokens"] == r["step"] * 4 * 32 * 2
    assert any(r["rank_losses"][0] != r["rank_losses"][1] for r in recs)  # ranks read different data
    assert recs[-1]["loss"] < recs[0]["loss"]
    ckpt = train_base / "base_checkpoints" / "d2"
    meta = read_meta(ckpt, 8)
    sums = meta.replica_param_checksums
    assert len(sums) == 2 and sums[0] == sums[1]  # identical weights on both ranks
    assert meta.world_size == 2 and meta.loader_state.world_size == 2
    assert len(meta.loader_state.ranks) == 2
    # the optimizer state is sharded: each rank wrote its own share
    files = ["optim_000008_rank0.pt", "optim_000008_rank1.pt"]
    assert sorted(p.name for p in ckpt.glob("optim_000008_*")) == files == meta.optimizer.files

    # Saved with 2 processes, resumed with 1: drop step 8 as if the job had died after step 4.
    delete_checkpoint(ckpt, 8)
    train(
        make_run_config(
            train_base, run_dir, steps=8, save_every=4, eval_every=4, eval_tokens=512, resume=True
        )
    )
    meta = read_meta(ckpt, 8)
    assert meta.world_size == 1 and meta.train_state.resumed_from == 4
    assert meta.optimizer.at_start == "restored"
    # one stream per tag: the records up to the resumed step are kept, the interrupted attempt's later ones go
    streamed = train_records(run_dir)
    assert [r["step"] for r in streamed] == list(range(1, 9))
    assert streamed[:4] == recs[:4]
    resumed = streamed[4:]
    assert resumed[0]["lr_mult"] == recs[4]["lr_mult"]
    # same model and optimizer state, other data partition: the loss continues where it was
    assert abs(resumed[0]["loss"] - recs[4]["loss"]) < 0.5


def test_one_process_resumed_with_two(train_base, tmp_path):
    run_dir = tmp_path / "run"
    common = {"steps": 6, "save_every": 3}
    with pytest.raises(SimulatedCrash):
        train(make_run_config(train_base, run_dir, **common), on_model=crash_after(3))
    ckpt = train_base / "base_checkpoints" / "d2"
    assert checkpoint_steps(ckpt) == [3]
    torchrun(make_run_config(train_base, run_dir, resume=True, **common), tmp_path / "run.json")
    meta = read_meta(ckpt, 6)
    assert meta.world_size == 2 and meta.train_state.resumed_from == 3
    assert meta.optimizer.at_start == "restored"
    sums = meta.replica_param_checksums
    assert sums[0] == sums[1]
    resumed = [r for r in train_records(run_dir) if len(r.get("rank_losses") or []) == 2]
    assert [r["step"] for r in resumed] == [4, 5, 6]
    state = torch.load(ckpt / "model_000006.pt")
    assert all(torch.isfinite(t).all() for t in state.values())
