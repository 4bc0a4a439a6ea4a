"""The trainer under torchrun x2: a run with the optimizer state sharded equals one with it replicated, its
per-rank files make exactly the replicated run's state when one process loads them, and a resume at 2 ranks
from them continues bit for bit."""

from __future__ import annotations

import pytest
import torch

from rlab.core.checkpoint import delete_checkpoint, load_optim_set
from rlab.core.checkpoint_meta import read_meta
from rlab.core.optim_shards import named_state
from tests.core.train_helpers import make_run_config, torchrun, train_records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


def test_sharded_run_equals_replicated_run(train_base, tmp_path):
    ckpts = train_base / "base_checkpoints"
    for tag, shard in (("sharded", True), ("replicated", False)):
        cfg = make_run_config(
            train_base, tmp_path / tag, tag=tag, steps=6, save_every=3, shard_optimizer=shard
        )
        torchrun(cfg, tmp_path / f"{tag}.json")
    sharded, replicated = read_meta(ckpts / "sharded", 6), read_meta(ckpts / "replicated", 6)
    assert sharded.optimizer.sharded and len(sharded.optimizer.files) == 2
    assert not replicated.optimizer.sharded and replicated.optimizer.files == ["optim_000006_rank0.pt"]
    assert not (ckpts / "replicated" / "optim_000006_rank1.pt").exists()

    # same losses and the same weights, bit for bit: AdamW is elementwise and Muon's update is per matrix
    losses = {
        tag: [r["rank_losses"] for r in train_records(tmp_path / tag)] for tag in ("sharded", "replicated")
    }
    assert losses["sharded"] == losses["replicated"]
    a, b = (torch.load(ckpts / tag / "model_000006.pt") for tag in ("sharded", "replicated"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    # the two files of the sharded run piece together into the replicated run's (complete) state
    files = {tag: load_optim_set(ckpts / tag, 6) for tag in ("sharded", "replicated")}
    assert [f["rank"] for f in files["sharded"]] == [0, 1]
    merged, full = (named_state(files[tag], []) for tag in ("sharded", "replicated"))
    assert merged.keys() == full.keys() and len(full) == len(a)
    for name, pieces in full.items():
        (_, whole), *rest = pieces
        assert not rest
        for key, value in whole.items():
            parts = [state[key] for _, state in merged[name]]
            got = parts[0] if value.dim() == 0 else torch.cat(parts)
            assert torch.equal(got, value), (name, key)

    # killed after step 3 and resumed at 2 ranks: the same weights at step 6 as the uninterrupted run
    delete_checkpoint(ckpts / "sharded", 6)
    cfg = make_run_config(
        train_base,
        tmp_path / "sharded",
        tag="sharded",
        steps=6,
        save_every=3,
        shard_optimizer=True,
        resume=True,
    )
    torchrun(cfg, tmp_path / "resume.json")
    assert read_meta(ckpts / "sharded", 6).train_state.resumed_from == 3
    resumed = torch.load(ckpts / "sharded" / "model_000006.pt")
    assert all(torch.equal(resumed[k], a[k]) for k in a)
