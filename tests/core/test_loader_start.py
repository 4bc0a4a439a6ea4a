"""Continuation data: starting after a nanochat base's recorded position, and keeping a saved stream's order."""

from __future__ import annotations

import pytest
import torch

from rlab.nanochat.loader_position import NanochatPosition, nanochat_position, nanochat_world_size
from tests.core.test_loader import _epoch_ids, _gathered, _ids, _loader, _read_and_stop, tagged_dir, tok  # noqa: F401
from tests.core.tiny_checkpoints import tiny_meta

# tagged_dir: 4 train shards x 4 row groups x 10 docs; shard s, row group g holds docs 40s+10g .. 40s+10g+9.


def _docs(pairs) -> set[int]:
    return {40 * s + 10 * g + i for s, g in pairs for i in range(10)}


@pytest.mark.parametrize(
    "pos,first",
    [
        (NanochatPosition(1, 0, world_size=2), (1, 2)),  # rank 0 read rg 0, rank 1 rg 1: resume at rg 2
        (NanochatPosition(1, 2, world_size=2), (2, 0)),  # the round [2, 3] ends shard 1
        (NanochatPosition(0, 1, world_size=1), (0, 2)),
        (NanochatPosition(0, 0, world_size=8), (1, 0)),  # a bound past the shard's end skips it
        (NanochatPosition(1, 1, world_size=None), (2, 0)),  # unknown world size: the rest of the shard
    ],
)
def test_unread_row_groups_follow_nanochats_resume_rule(pos, first):
    all_rgs = [(s, g) for s in range(4) for g in range(4)]
    unread = pos.unread(all_rgs)
    assert unread[0] == first
    assert unread == [p for p in all_rgs if p >= first]  # file order, everything after


@pytest.mark.parametrize("world", [1, 2, 3])
def test_first_epoch_reads_only_what_the_base_had_not(tagged_dir, tok, world):  # noqa: F811
    after = NanochatPosition(1, 0, world_size=2)
    loaders = [_loader(tagged_dir, tok, rank=r, world_size=world, after=after) for r in range(world)]
    per_rank = [_epoch_ids(ld, tok) for ld in loaders]
    unread = _docs(after.unread([(s, g) for s in range(4) for g in range(4)]))
    assert set().union(*per_rank) <= unread and len(set().union(*per_rank)) > 0.8 * len(unread)
    for i in range(world):
        for j in range(i + 1, world):
            assert not per_rank[i] & per_rank[j]


def test_first_epoch_matches_nanochats_own_rank_assignment(tagged_dir, tok):  # noqa: F811
    """Same world size as the base: rank r reads row groups base*W + r, + W, ... as nanochat's resume does."""
    after = NanochatPosition(0, 0, world_size=2)
    loader = _loader(tagged_dir, tok, rank=1, world_size=2, after=after, batch_size=1, seq_len=16)
    x, _ = next(loader)
    assert _ids(tok, x) == {30}  # shard 0, row group 3 (rank 1's first after the round [0, 1])
    loader.close()


def test_the_epoch_after_the_first_covers_all_data(tagged_dir, tok):  # noqa: F811
    loader = _loader(tagged_dir, tok, after=NanochatPosition(3, 2, world_size=2))  # 0 row groups left
    assert loader.state_dict()["epoch"] == 1  # epoch 0 is empty: this is a full shuffled pass
    seen = _epoch_ids(loader, tok)
    assert seen <= set(range(160)) and len(seen) > 150  # all but the batch that straddles into epoch 2


def test_resumed_continuation_rebuilds_its_first_epoch_from_the_state(tagged_dir, tok):  # noqa: F811
    after = NanochatPosition(1, 0, world_size=2)
    straight = [_loader(tagged_dir, tok, rank=r, world_size=2, after=after) for r in range(2)]
    expected = [[next(ld) for _ in range(10)][4:] for ld in straight]
    first = [_loader(tagged_dir, tok, rank=r, world_size=2, after=after) for r in range(2)]
    for ld in first:
        for _ in range(4):
            next(ld)
    state = _gathered(first)
    assert state["ranks"][0]["after"]["pq_idx"] == 1
    for ld in first + straight:
        ld.close()
    resumed = [_loader(tagged_dir, tok, rank=r, world_size=2, state=state) for r in range(2)]  # no `after=`
    for r in range(2):
        for want in expected[r]:
            got = next(resumed[r])
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        resumed[r].close()


def test_state_keeps_the_seed_it_was_saved_with(tagged_dir, tok):  # noqa: F811
    """A continuation of an rlab base reads on in the base's order even if its own seed differs."""
    base = _loader(tagged_dir, tok, seed=7)
    for _ in range(5):
        next(base)
    state = _gathered([base])
    want = [next(base) for _ in range(3)]
    base.close()
    cont = _loader(tagged_dir, tok, seed=123, state=state)
    for w in want:
        assert torch.equal(next(cont)[0], w[0])
    assert cont.state_dict()["seed"] == 7
    cont.close()


def _row_group_of(doc: int) -> tuple[int, int]:
    return doc // 40, (doc % 40) // 10


@pytest.mark.parametrize("world", [1, 2])
def test_a_redrawn_replicate_reads_other_unread_text(tagged_dir, tok, world):  # noqa: F811
    """Seed replicates of one continuation: none reads what the base read, and two draws differ."""
    bases = [
        _loader(tagged_dir, tok, seed=7, rank=r, world_size=world, batch_size=1, seq_len=16)
        for r in range(world)
    ]
    read_by_base, state = _read_and_stop(bases, tok)
    started = {_row_group_of(d) for d in read_by_base}

    def docs(redraw_seed, batches=None):
        out: set[int] = set()
        for r in range(world):
            ld = _loader(
                tagged_dir, tok, seed=8, rank=r, world_size=world, state=state, redraw_seed=redraw_seed
            )
            if batches is None:
                out |= _epoch_ids(ld, tok)
            else:
                for _ in range(batches):
                    out |= _ids(tok, next(ld)[0])
            assert ld.state_dict()["redraw"]["seed"] == redraw_seed
            ld.close()
        return out

    rest = docs(43)
    assert rest and not {_row_group_of(d) for d in rest} & started  # nothing from a row group the base began
    assert docs(43, batches=2) != docs(44, batches=2)  # another draw: other text first


def test_a_resumed_replicate_keeps_its_draw(tagged_dir, tok):  # noqa: F811
    base = _loader(tagged_dir, tok, seed=7)
    for _ in range(3):
        next(base)
    state = _gathered([base])
    base.close()
    first = _loader(tagged_dir, tok, seed=8, state=state, redraw_seed=8)
    for _ in range(2):
        next(first)
    saved = _gathered([first])
    want = [next(first) for _ in range(4)]
    first.close()
    resumed = _loader(tagged_dir, tok, seed=8, state=saved, redraw_seed=8)
    for w in want:
        assert torch.equal(next(resumed)[0], w[0])
    resumed.close()
    plain = _loader(tagged_dir, tok, seed=8, state=state)  # no redraw: the base's own order, as before
    assert plain.state_dict()["redraw"] is None
    plain.close()


def test_world_size_from_shards_or_batch_arithmetic(tmp_path):
    meta = tiny_meta(
        20,
        dataloader_state_dict={"pq_idx": 2, "rg_idx": 5},
        device_batch_size=4,
        max_seq_len=256,
        user_config={"total_batch_size": 8192},
    )
    assert nanochat_world_size(tmp_path, 20, meta)[0] == 8  # 8192 / (4 x 256): world size x grad accum
    for r in range(2):
        (tmp_path / f"optim_000020_rank{r}.pt").write_bytes(b"")
    assert nanochat_world_size(tmp_path, 20, meta)[0] == 2
    assert nanochat_position(tmp_path, 20, meta) == NanochatPosition(2, 5, 2, 1)
    assert nanochat_position(tmp_path, 20, tiny_meta(20, user_config={})) is None
    assert nanochat_world_size(tmp_path / "none", 20, tiny_meta(20))[0] is None
    assert nanochat_world_size(tmp_path / "none", 20, None)[0] is None
