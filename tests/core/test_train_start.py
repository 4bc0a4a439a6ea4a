"""Where a continuation starts: data after the base's, exact counters across resumes, the fresh-optimizer fallback."""

from __future__ import annotations

import pytest
import torch

from rlab.core.checkpoint_meta import read_meta
from rlab.core.train import train
from rlab.core.train_start import FRESH_LR_SCALE
from rlab.paths import model_file, optim_file
from tests.core.train_helpers import make_run_config, train_records

pytestmark = pytest.mark.usefixtures("one_thread")


def _capture_inputs(store: list):
    def attach(model):
        model.register_forward_pre_hook(lambda module, args: store.append(args[0].clone()))

    return attach


def test_continuation_reads_on_where_the_base_stopped(train_base, tmp_path):
    """An rlab base: the continuation's batches are the ones the base would have read next (its seed's
    order), never the base's own."""
    base_inputs: list = []
    train(
        make_run_config(train_base, tmp_path / "base", tag="base", steps=4, seed=7),
        on_model=_capture_inputs(base_inputs),
    )
    meta = read_meta(train_base / "base_checkpoints" / "base", 4)
    longer: list = []
    train(
        make_run_config(train_base, tmp_path / "longer", tag="longer", steps=7, seed=7),
        on_model=_capture_inputs(longer),
    )

    cont: list = []
    data_start = {"source": "rlab", "tag": "base", "step": 4, "loader_state": meta.loader_state.model_dump()}
    cfg = make_run_config(
        train_base,
        tmp_path / "cont",
        tag="base-pi",
        start=("base", 4),
        stretch="pi",
        steps=3,
        seed=99,
        data_start=data_start,
    )
    train(cfg, on_model=_capture_inputs(cont))
    assert len(cont) == 3
    for got, want in zip(cont, longer[4:], strict=True):  # seed 99 is not the base's: the stream's order wins
        assert torch.equal(got, want)
    seen = {tuple(row.tolist()) for batch in base_inputs for row in batch}
    assert not any(tuple(row.tolist()) in seen for batch in cont for row in batch)
    out = read_meta(train_base / "base_checkpoints" / "base-pi", 7)
    assert out.data_start.source == "rlab" and out.data_start.step == 4
    assert out.loader_state.ranks[0]["seed"] == 7


def test_no_data_start_is_recorded_as_the_beginning(train_base, tmp_path):
    train(make_run_config(train_base, tmp_path / "run", steps=2))
    assert read_meta(train_base / "base_checkpoints" / "d2", 2).data_start.model_dump() == {
        "source": "beginning"
    }


def _poison_and_crash(poison_steps: set[int], start_step: int, crash_after_forwards: int | None):
    """lm_head gradient NaN at the given global steps (1 micro-batch per step), and a crash after N forwards."""
    backward, forward = [0], [0]

    def attach(model):
        def grad_hook(grad):
            backward[0] += 1
            return grad * float("nan") if start_step + backward[0] in poison_steps else grad

        def crash(module, args):
            forward[0] += 1
            if crash_after_forwards is not None and forward[0] > crash_after_forwards:
                raise RuntimeError("simulated crash")

        model.lm_head.weight.register_hook(grad_hook)
        model.register_forward_pre_hook(crash)

    return attach


def test_counts_are_exact_after_three_resumes(train_base, tmp_path):
    """Killed and resumed 3 times == uninterrupted: tokens_trained, run tokens, skipped steps and weights."""
    common = {"steps": 12, "save_every": 2}
    poison = {3, 8}
    train(
        make_run_config(train_base, tmp_path / "full", tag="full", **common),
        on_model=_poison_and_crash(poison, 0, None),
    )

    # crashes during steps 6, 8 and 10, each after its previous save (4, 6, 8); the 4th run finishes
    for resume_from, crash in ((0, 5), (4, 3), (6, 3), (8, None)):
        cfg = make_run_config(train_base, tmp_path / "cut", tag="cut", resume=resume_from > 0, **common)
        hooks = _poison_and_crash(poison, resume_from, crash)
        if crash is None:
            train(cfg, on_model=hooks)
        else:
            with pytest.raises(RuntimeError, match="simulated crash"):
                train(cfg, on_model=hooks)
    full = read_meta(train_base / "base_checkpoints" / "full", 12)
    cut = read_meta(train_base / "base_checkpoints" / "cut", 12)
    per_step = 4 * 32
    assert cut.train_state.resumed_from == 8
    assert full.train_state.skipped_total == cut.train_state.skipped_total == 2
    assert full.tokens_trained == cut.tokens_trained == (12 - 2) * per_step  # skipped steps train nothing
    assert full.train_state.run_tokens == cut.train_state.run_tokens == 12 * per_step
    assert train_records(tmp_path / "cut")[-1]["tokens"] == 12 * per_step
    a = torch.load(model_file(train_base / "base_checkpoints" / "full", 12))
    b = torch.load(model_file(train_base / "base_checkpoints" / "cut", 12))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-6, atol=1e-6)


def test_tokens_of_a_continuation_start_from_the_bases(train_base, tmp_path):
    train(make_run_config(train_base, tmp_path / "base", tag="base", steps=3))
    cfg = make_run_config(
        train_base, tmp_path / "cont", tag="cont", start=("base", 3), steps=4, seq_len=64, save_every=2
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(cfg, on_model=_poison_and_crash(set(), 3, 3))
    train(cfg.model_copy(update={"resume": True}))
    meta = read_meta(train_base / "base_checkpoints" / "cont", 7)
    assert meta.tokens_trained == 3 * 4 * 32 + 4 * 4 * 64  # the base's, then this run's, each once
    assert meta.train_state.run_tokens == 4 * 4 * 64


def test_unusable_optimizer_state_means_warmup_at_a_reduced_lr(train_base, tmp_path):
    """Shards that cannot be imported: a fresh optimizer at FRESH_LR_SCALE with warmup, kept across a resume."""

    train(make_run_config(train_base, tmp_path / "base", tag="base", steps=2))
    base_ckpt = train_base / "base_checkpoints" / "base"
    optim_file(base_ckpt, 2, 0).unlink()
    torch.save([{"state": {}, "param_groups": []}], optim_file(base_ckpt, 2, 1))  # a stray rank-1 shard
    cfg = make_run_config(
        train_base,
        tmp_path / "cont",
        tag="cont",
        start=("base", 2),
        steps=10,
        save_every=5,
        lr={"warmup_steps": 0},
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(cfg, on_model=_poison_and_crash(set(), 2, 6))
    meta = read_meta(train_base / "base_checkpoints" / "cont", 5)  # crashed in step 8
    note = meta.optimizer.at_start
    assert note.startswith("fresh") and "rank 0 missing" in note and f"x{FRESH_LR_SCALE:g}" in note
    assert meta.optimizer.imported.restored is False
    assert meta.train_state.lr_policy.model_dump() == {"peak_lr_scale": FRESH_LR_SCALE, "warmup_steps": 1}
    train(cfg.model_copy(update={"resume": True}))
    recs = train_records(tmp_path / "cont")
    assert recs[0]["lr_mult"] == 1.0  # warmup of 1 step (10% of 10)
    resumed = read_meta(train_base / "base_checkpoints" / "cont", 12)
    assert resumed.train_state.lr_policy == meta.train_state.lr_policy
    state = torch.load(optim_file(train_base / "base_checkpoints" / "cont", 12, 0), weights_only=False)
    peaks = [g["initial_lr"] for opt in state["optimizers"] for g in opt["state_dict"]["param_groups"]]
    assert peaks and all(p <= FRESH_LR_SCALE * 0.2 * (32 / 768) ** -0.5 + 1e-12 for p in peaks)
