"""TokenLoader: packing, determinism, disjoint ranks, exact resume, world-size changes, bad layouts."""

from __future__ import annotations

import json
import re
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from rlab.core.loader import TokenLoader
from rlab.core.tokenizer import Tokenizer
from rlab.data.shards import shard_name, write_parquet_texts
from rlab.errors import DataError

DOC_ID = re.compile(r"doc(\d{4})x")


@pytest.fixture(scope="module")
def tok(tiny_base_dir) -> Tokenizer:
    return Tokenizer.from_directory(tiny_base_dir / "tokenizer")


def _tagged_docs(start: int, n: int) -> list[str]:
    # Each document repeats its own id, so any window of it names the document.
    return [" ".join([f"doc{i:04d}x"] * (20 + (i * 7) % 30)) for i in range(start, start + n)]


@pytest.fixture(scope="module")
def tagged_dir(tmp_path_factory):
    """4 train shards x 4 row groups (16 row groups, 160 docs) + a val shard with 2 row groups (10 docs)."""
    data = tmp_path_factory.mktemp("tagged") / "base_data"
    for s in range(4):
        write_parquet_texts(_tagged_docs(s * 40, 40), data / shard_name(s), row_groups=4)
    write_parquet_texts(_tagged_docs(1000, 10), data / shard_name(4), row_groups=2)
    return data


def _ids(tok, inputs: torch.Tensor) -> set[int]:
    return {int(m) for row in inputs.tolist() for m in DOC_ID.findall(tok.decode(row))}


def _loader(data, tok, **kw):
    kw.setdefault("split", "train")
    kw.setdefault(
        "batch_size", 4
    )  # 260 tokens a step: an epoch of the tagged train split is ~84 steps at 2 ranks
    kw.setdefault("seq_len", 64)
    kw.setdefault("seed", 7)
    split = kw.pop("split")
    return TokenLoader(data, tok, split, **kw)


def test_batches_pack_bos_prefixed_documents(tiny_base_dir, tok):
    loader = TokenLoader(tiny_base_dir / "base_data", tok, "train", batch_size=3, seq_len=64, seed=0)
    rows = []
    for _ in range(5):
        x, y = next(loader)
        assert x.shape == y.shape == (3, 64) and x.dtype == y.dtype == torch.long
        assert torch.equal(x[:, 1:], y[:, :-1])  # targets are inputs shifted by one
        rows.append(torch.cat([x, y[:, -1:]], dim=1))  # the (B, T+1) window
    stream = torch.cat([r.reshape(-1) for r in rows]).tolist()
    assert stream[0] == tok.bos_token_id  # the first document starts the stream
    assert stream.count(tok.bos_token_id) >= 2  # documents are packed back to back
    text = tok.decode([t for t in stream if t != tok.bos_token_id][:200])
    assert text.strip()
    loader.close()


def test_deterministic_for_a_seed_and_different_across_seeds(tagged_dir, tok):
    a = [next(_loader(tagged_dir, tok, seed=1))[0] for _ in range(1)]
    b = [next(_loader(tagged_dir, tok, seed=1))[0] for _ in range(1)]
    c = _loader(tagged_dir, tok, seed=2)
    assert torch.equal(a[0], b[0])
    assert not torch.equal(a[0], next(c)[0])


def _epoch_ids(loader, tok, max_steps=400) -> set[int]:
    """Doc ids seen in the batches that lie wholly inside the loader's current epoch."""
    epoch = loader.state_dict()["epoch"]
    seen: set[int] = set()
    for _ in range(max_steps):
        x, _ = next(loader)
        if loader.state_dict()["epoch"] != epoch:
            break
        seen |= _ids(tok, x)
    loader.close()
    return seen


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_read_disjoint_documents(tagged_dir, tok, world_size):
    per_rank = [
        _epoch_ids(_loader(tagged_dir, tok, rank=r, world_size=world_size), tok) for r in range(world_size)
    ]
    for i in range(world_size):
        assert per_rank[i], f"rank {i} read nothing"
        for j in range(i + 1, world_size):
            assert not per_rank[i] & per_rank[j], f"ranks {i} and {j} share documents"
    assert set().union(*per_rank) <= set(range(160))  # train only, never the val shard


def test_more_ranks_than_row_groups_splits_them(tagged_dir, tok):
    """The val shard has 2 row groups; 4 ranks still each get their own documents (no hang)."""
    loaders = [_loader(tagged_dir, tok, split="val", rank=r, world_size=4) for r in range(4)]
    assert loaders[0].parts == 2
    per_rank = [_epoch_ids(loader, tok) for loader in loaders]
    assert all(per_rank)
    for i in range(4):
        for j in range(i + 1, 4):
            assert not per_rank[i] & per_rank[j]
    assert set().union(*per_rank) <= set(range(1000, 1010))


def test_too_few_documents_for_the_ranks_is_an_error_not_a_hang(tmp_path, tok):
    write_parquet_texts(_tagged_docs(0, 5), tmp_path / shard_name(0))
    write_parquet_texts(_tagged_docs(100, 1), tmp_path / shard_name(1), row_groups=1)
    loader = _loader(tmp_path, tok, split="val", rank=1, world_size=2)
    result: list = []

    def consume():
        try:
            next(loader)
        except DataError as exc:
            result.append(exc)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), "loader hung"
    assert result and "got no documents" in result[0].message


def _gathered(loaders) -> dict:
    return {"world_size": len(loaders), "ranks": [ld.state_dict() for ld in loaders]}


def _read_and_stop(loaders, tok, batches: int = 6) -> tuple[set[int], dict]:
    """The documents `batches` batches of each loader read, and the loaders' gathered state; the loaders closed."""
    seen: set[int] = set()
    for ld in loaders:
        for _ in range(batches):
            seen |= _ids(tok, next(ld)[0])
    state = _gathered(loaders)
    for ld in loaders:
        ld.close()
    return seen, state


@pytest.mark.parametrize("steps_before", [3, 90])  # 90 steps crosses an epoch boundary
def test_resume_same_world_size_is_exact(tagged_dir, tok, steps_before):
    world, after = 2, 12
    straight = [_loader(tagged_dir, tok, rank=r, world_size=world) for r in range(world)]
    expected = [[next(ld) for _ in range(steps_before + after)][steps_before:] for ld in straight]
    first = [_loader(tagged_dir, tok, rank=r, world_size=world) for r in range(world)]
    for ld in first:
        for _ in range(steps_before):
            next(ld)
    state = json.loads(json.dumps(_gathered(first)))  # it travels through a checkpoint's JSON meta
    assert (state["ranks"][0]["epoch"] > 0) == (steps_before > 84)
    for ld in first + straight:
        ld.close()
    resumed = [_loader(tagged_dir, tok, rank=r, world_size=world, state=state) for r in range(world)]
    for r, ld in enumerate(resumed):
        for i in range(after):
            x, y = next(ld)
            assert torch.equal(x, expected[r][i][0]) and torch.equal(y, expected[r][i][1]), (r, i)
        ld.close()


def test_state_before_iterating_resumes_at_start(tagged_dir, tok):
    fresh = _loader(tagged_dir, tok)
    state = fresh.state_dict()
    again = _loader(tagged_dir, tok, state={"world_size": 1, "ranks": [state]})
    assert torch.equal(next(fresh)[0], next(again)[0])
    fresh.close()
    again.close()


@pytest.mark.parametrize("old_world,new_world", [(2, 3), (3, 1)])
def test_resume_at_another_world_size_continues_without_repeats(
    tagged_dir, tok, old_world, new_world, caplog
):
    old = [_loader(tagged_dir, tok, rank=r, world_size=old_world) for r in range(old_world)]
    seen, state = _read_and_stop(old, tok)
    with caplog.at_level("INFO", logger="rlab.core.loader_order"):
        new = [_loader(tagged_dir, tok, rank=r, world_size=new_world, state=state) for r in range(new_world)]
    assert "different world size" in caplog.text
    after = [_epoch_ids(ld, tok) for ld in new]
    assert set().union(*after), "nothing left in the epoch"
    assert not set().union(*after) & seen, "documents repeated after the world-size change"
    for i in range(new_world):
        for j in range(i + 1, new_world):
            assert not after[i] & after[j]


def test_state_is_small_and_json(tagged_dir, tok):
    ld = _loader(tagged_dir, tok, rank=1, world_size=2)
    next(ld)
    state = ld.state_dict()
    assert len(json.dumps(state)) < 300
    assert {"epoch", "slot", "doc", "tok", "rank", "world_size"} <= state.keys()
    ld.close()
    assert ld._thread is None


def test_wrong_rank_state_and_split_are_refused(tagged_dir, tok):
    ld = _loader(tagged_dir, tok, rank=0, world_size=2)
    with pytest.raises(DataError, match="rank 0 given to rank 1"):
        _loader(tagged_dir, tok, rank=1, world_size=2, state=ld.state_dict())
    with pytest.raises(DataError, match="train split, not val"):
        _loader(
            tagged_dir,
            tok,
            split="val",
            state={"world_size": 1, "ranks": [_loader(tagged_dir, tok).state_dict()]},
        )


def test_bad_layouts(tmp_path, tok):
    with pytest.raises(DataError, match="No data directory"):
        _loader(tmp_path / "missing", tok)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="No .parquet shards"):
        _loader(tmp_path / "empty", tok)
    one = tmp_path / "one"
    write_parquet_texts(["a", "b"], one / shard_name(0))
    with pytest.raises(DataError, match="need at least 2"):
        _loader(one, tok)

    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(pa.table({"content": ["x"]}), bad / shard_name(0))
    write_parquet_texts(["y"], bad / shard_name(1))
    with pytest.raises(DataError, match="no 'text' column"):
        _loader(bad, tok)
    with pytest.raises(DataError, match="outside world size"):
        _loader(bad, tok, rank=2, world_size=2)
