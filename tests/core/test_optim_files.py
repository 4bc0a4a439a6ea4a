"""Optimizer files: a set is read whole and checked, stale ranks go, and rlab's earlier single file still loads."""

from __future__ import annotations

import pytest
import torch

from rlab.core.checkpoint import load_optim_set, save_checkpoint, write_optim_file
from rlab.core.optim import build_optimizers
from rlab.core.optim_shards import OPTIM_FORMAT_V1, load_optimizer_state, optimizer_shard
from rlab.errors import CheckpointError
from rlab.paths import optim_file
from rlab.spec.train import LRSpec
from tests.core.test_sharded_optim import set_grads, tiny_model
from tests.core.tiny_checkpoints import tiny_meta


def test_a_set_is_read_whole_and_checked(tmp_path):
    first = {"format": "rlab.optim/2", "rank": 0, "world_size": 2, "save_id": "a", "optimizers": []}
    write_optim_file(tmp_path, 5, 0, first)
    with pytest.raises(CheckpointError, match="optim_000005_rank1.pt is missing"):
        load_optim_set(tmp_path, 5)
    write_optim_file(tmp_path, 5, 1, {**first, "rank": 1, "save_id": "b"})  # from another save
    with pytest.raises(CheckpointError, match="another save"):
        load_optim_set(tmp_path, 5)
    write_optim_file(tmp_path, 5, 1, {**first, "rank": 1})
    assert [p["rank"] for p in load_optim_set(tmp_path, 5)] == [0, 1]
    torch.save([{"state": {}}], optim_file(tmp_path, 6, 0))  # nanochat's shards are not rlab's set
    assert load_optim_set(tmp_path, 6) is None and load_optim_set(tmp_path, 7) is None


def test_a_set_of_fewer_ranks_removes_the_older_files_of_higher_ranks(tmp_path):
    for rank in range(3):
        write_optim_file(tmp_path, 4, rank, {"rank": rank})
    save_checkpoint(tmp_path, 4, {"w": torch.ones(2)}, tiny_meta(4), {"rank": 0}, optim_files=2)
    assert sorted(p.name for p in tmp_path.glob("optim_*")) == [
        "optim_000004_rank0.pt",
        "optim_000004_rank1.pt",
    ]


def test_the_single_file_of_rlab_before_sharding_still_loads(tmp_path):
    """`rlab.optim/1`: torch Muon and AdamW state dicts of every parameter, in rank 0's file."""
    old_model, model = tiny_model(), tiny_model()
    old = build_optimizers(old_model, LRSpec(), 32)
    set_grads(old_model, 0)
    for opt in old:
        opt.step()
    write_optim_file(
        tmp_path,
        1,
        0,
        {"format": OPTIM_FORMAT_V1, "kinds": ["Muon", "AdamW"], "optimizers": [o.state_dict() for o in old]},
    )
    files = load_optim_set(tmp_path, 1)
    assert files is not None
    new = build_optimizers(model, LRSpec(), 32)
    load_optimizer_state(new, files)
    before, after = optimizer_shard(old, 0)["optimizers"], optimizer_shard(new, 0)["optimizers"]
    for a, b in zip(before, after, strict=True):
        assert a["state_dict"]["state"].keys() == b["state_dict"]["state"].keys()
        for index, state in a["state_dict"]["state"].items():
            for key, value in state.items():
                assert torch.equal(value, b["state_dict"]["state"][index][key]), (a["names"][index], key)
