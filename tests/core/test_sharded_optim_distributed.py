"""Two gloo processes: sharded optimizers step exactly like replicated ones, hold the counted bytes, and their
state moves between world sizes 2 and 1 without changing a bit."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rlab.core.checkpoint import load_model, load_optim_set, write_optim_file
from rlab.core.optim import build_optimizers, set_lr_multiplier
from rlab.core.optim_sharding import optimizer_state_bytes
from rlab.core.optim_shards import load_optimizer_state, optimizer_shard
from rlab.nanochat.optim_import import import_nanochat_optimizer
from rlab.spec.train import LRSpec
from tests.conftest import NANOCHAT_REFERENCE_SKIP, nanochat_reference_path
from tests.core.test_sharded_optim import state_bytes, tiny_model

pytestmark = pytest.mark.slow

WORLD, STEPS, STEP = 2, 3, 3


def averaged_grads(model: torch.nn.Module, step: int, rank: int, world: int) -> dict[str, torch.Tensor]:
    """Each rank's own random gradient, averaged across ranks (what DDP leaves in .grad)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    grads = {n: torch.randn(p.shape, generator=g) for n, p in model.named_parameters()}
    if world > 1:
        for t in grads.values():
            dist.all_reduce(t)
            t /= world
    return grads


def train_steps(models_and_opts, steps: range, rank: int, world: int) -> None:
    for step in steps:
        grads = averaged_grads(models_and_opts[0][0], step, rank, world)
        for model, opts in models_and_opts:
            for n, p in model.named_parameters():
                p.grad = grads[n].clone()
            set_lr_multiplier(opts, 1.0 - 0.2 * step)
            for opt in opts:
                opt.step()
                opt.zero_grad(set_to_none=True)


def named_state(model: torch.nn.Module, opts) -> dict[str, dict[str, torch.Tensor]]:
    """Full-parameter state by name (row views of ShardedAdamW mapped back to their parameters)."""
    out = {}
    for opt in opts:
        for name, p in zip(opt.param_names, [p for g in opt.param_groups for p in g["params"]], strict=True):
            if p in opt.state:
                out[name] = {k: v.clone() for k, v in opt.state[p].items()}
    return out


def _worker(rank: int, world: int, tmp: str, architecture: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp}/pg", rank=rank, world_size=world)
    torch.set_num_threads(1)
    out = Path(tmp)
    model = tiny_model(architecture)
    ref = copy.deepcopy(model)
    sharded = build_optimizers(model, LRSpec(), 32, rank=rank, world_size=world)
    replicated = build_optimizers(ref, LRSpec(), 32)  # every rank holds and computes everything
    train_steps([(model, sharded), (ref, replicated)], range(STEPS), rank, world)
    result = {
        "equal": all(torch.equal(a, b) for a, b in zip(model.parameters(), ref.parameters(), strict=True)),
        "state_bytes": state_bytes(sharded),
        "replicated_bytes": state_bytes(replicated),
        "counted": optimizer_state_bytes(model.parameter_groups(), world).per_rank[rank],
    }
    # the 2-rank set, and (rank 0) the replicated state as a 1-file set, as the trainer writes them
    write_optim_file(out / "sharded", STEP, rank, {**optimizer_shard(sharded, rank), "save_id": "s"})
    if rank == 0:
        write_optim_file(out / "replicated", STEP, 0, {**optimizer_shard(replicated, 0), "save_id": "r"})
        torch.save(model.state_dict(), out / "model.pt")
    dist.barrier()

    # 1 -> 2 ranks: the replicated file loaded by both ranks gives each exactly the sharded run's share
    moved_model = copy.deepcopy(ref)
    moved = build_optimizers(moved_model, LRSpec(), 32, rank=rank, world_size=world)
    load_optimizer_state(moved, load_optim_set(out / "replicated", STEP))
    mine, theirs = named_state(moved_model, moved), named_state(model, sharded)
    result["resharded_keys_equal"] = mine.keys() == theirs.keys()
    result["resharded_equal"] = all(torch.equal(mine[n][k], theirs[n][k]) for n in theirs for k in theirs[n])
    train_steps([(model, sharded), (moved_model, moved)], range(STEPS, STEPS + 2), rank, world)
    result["continued_equal"] = all(
        torch.equal(a, b) for a, b in zip(model.parameters(), moved_model.parameters(), strict=True)
    )
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


@pytest.mark.parametrize("architecture", ["nanochat-2025", "nanochat-2026"])
def test_two_ranks_shard_exactly_and_move_between_world_sizes(tmp_path, architecture):
    for name in ("sharded", "replicated"):
        (tmp_path / name).mkdir()
    mp.spawn(_worker, args=(WORLD, str(tmp_path), architecture), nprocs=WORLD, join=True)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    for r in results:
        assert r["equal"]  # sharded steps == replicated steps, bit for bit (AdamW elementwise, NS per matrix)
        assert r["state_bytes"] == r["counted"]  # optimizer_state_bytes is what each rank holds
        assert r["resharded_keys_equal"] and r["resharded_equal"]  # 1 -> 2: exactly the 2-rank run's shares
        assert r["continued_equal"]  # ... and the next steps from it are the 2-rank run's
        assert r["state_bytes"] < 0.6 * r["replicated_bytes"]  # about half each (small tensors replicated)

    # 2 -> 1 rank: the two files loaded by one process give the replicated run's state exactly
    model = tiny_model(architecture)
    model.load_state_dict(torch.load(tmp_path / "model.pt"))
    ref = copy.deepcopy(model)
    merged = build_optimizers(model, LRSpec(), 32)
    load_optimizer_state(merged, load_optim_set(tmp_path / "sharded", STEP))
    replicated = build_optimizers(ref, LRSpec(), 32)
    load_optimizer_state(replicated, load_optim_set(tmp_path / "replicated", STEP))
    mine, theirs = named_state(model, merged), named_state(ref, replicated)
    assert mine.keys() == theirs.keys() == {n for n, _ in model.named_parameters()}
    for name in theirs:
        for key in theirs[name]:
            assert torch.equal(mine[name][key], theirs[name][key]), (name, key)
    train_steps([(model, merged), (ref, replicated)], range(STEPS, STEPS + 2), 0, 1)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), ref.parameters(), strict=True))


NANOCHAT = {"d314e96": "DistAdamW+DistMuon", "head": "MuonAdamW"}


def _import_worker(rank: int, world: int, tmp: str, ckpt: Path) -> None:

    dist.init_process_group("gloo", init_method=f"file://{tmp}/pg", rank=rank, world_size=world)
    model, _ = load_model(ckpt, 20)
    optimizers = build_optimizers(model, LRSpec(), model.config.n_embd, rank=rank, world_size=world)
    report = import_nanochat_optimizer(ckpt, 20, model, optimizers)
    payload = {**optimizer_shard(optimizers, rank), "save_id": "n", "report": report.to_meta().model_dump()}
    write_optim_file(Path(tmp), 20, rank, payload)
    dist.destroy_process_group()


@pytest.mark.parametrize("version", list(NANOCHAT))
def test_nanochat_import_at_two_ranks_gives_each_rank_its_share(tmp_path, version):
    """nanochat's 2-rank shards imported by a 2-rank rlab run: pieced back together, the state is exactly
    what a one-process import gives."""

    ckpt = nanochat_reference_path(version) / "base_checkpoints" / "d2"
    if not (ckpt / "model_000020.pt").is_file():
        pytest.skip(NANOCHAT_REFERENCE_SKIP)
    mp.spawn(_import_worker, args=(WORLD, str(tmp_path), ckpt), nprocs=WORLD, join=True)
    files = load_optim_set(tmp_path, 20)
    assert all(f["report"]["restored"] and NANOCHAT[version] in f["report"]["format"] for f in files)
    model, _ = load_model(ckpt, 20)
    merged = build_optimizers(model, LRSpec(), model.config.n_embd)
    load_optimizer_state(merged, files)
    ref_model, _ = load_model(ckpt, 20)
    imported = build_optimizers(ref_model, LRSpec(), ref_model.config.n_embd)
    assert import_nanochat_optimizer(ckpt, 20, ref_model, imported).restored
    mine, theirs = named_state(model, merged), named_state(ref_model, imported)
    assert mine.keys() == theirs.keys() == {n for n, _ in model.named_parameters()}
    for name in theirs:
        for key in theirs[name]:
            assert torch.equal(mine[name][key], theirs[name][key]), (name, key)
    assert merged[0].param_groups[0]["momentum"] == imported[0].param_groups[0]["momentum"]
