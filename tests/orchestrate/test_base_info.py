"""Target length and data start come from the base checkpoint's meta (the plan side)."""

import json
import shutil

import pytest

from rlab.errors import CheckpointError, SpecError
from rlab.orchestrate.base_info import read_base_info
from rlab.orchestrate.plan import length_warnings, plan_continue, resolve_lengths
from rlab.paths import BaseLayout
from rlab.spec.loading import load_spec
from rlab.spec.train import TrainSpec
from tests.conftest import nanochat_reference_path, needs_nanochat_reference

REF = nanochat_reference_path("head")


def _base_with_meta(tmp_path, meta: dict, tag="d20", step=21400) -> BaseLayout:
    """A base whose meta is `meta` with its model_config filled out (the plan reads sequence_len only)."""
    base = BaseLayout(tmp_path / "base")
    ckpt = base.checkpoint_dir(tag)
    ckpt.mkdir(parents=True)
    shape = {
        "vocab_size": 512,
        "n_layer": 2,
        "n_head": 2,
        "n_kv_head": 2,
        "n_embd": 32,
        **meta["model_config"],
    }
    (ckpt / f"meta_{step:06d}.json").write_text(json.dumps({"step": step, **meta, "model_config": shape}))
    return base


def test_d20_at_2048_plans_8192_and_factor_4_from_the_nanochat_position(tmp_path):
    meta = {"model_config": {"sequence_len": 2048}, "dataloader_state_dict": {"pq_idx": 3, "rg_idx": 17}}
    base = _base_with_meta(tmp_path, meta)
    spec = load_spec(
        None, base_dir=base.root, results_dir=tmp_path / "r", from_step=21400, variants="rope,pi,ntk,yarn"
    )
    info = read_base_info(base, "d20", 21400)
    runs = plan_continue(spec, info)
    assert [(r.tag, r.train.seq_len, r.rope.factor, r.rope.original_len) for r in runs] == [
        ("d20-rope", 8192, 1.0, 2048),
        ("d20-pi", 8192, 4.0, 2048),
        ("d20-ntk", 8192, 4.0, 2048),
        ("d20-yarn", 8192, 4.0, 2048),
    ]
    assert all((r.data_start.pq_idx, r.data_start.rg_idx) == (3, 17) for r in runs)  # the same start for all
    assert "L0=2048" in runs[1].rope.describe() and "ckpt" not in runs[1].rope.describe()
    assert length_warnings(resolve_lengths(spec, info), info) == []
    beginning = load_spec(
        None, base_dir=base.root, results_dir=tmp_path / "r", from_step=21400, variants="pi"
    )
    beginning = beginning.model_copy(
        update={"train": beginning.train.model_copy(update={"data_start": "beginning"})}
    )
    assert plan_continue(beginning, info)[0].data_start is None


def test_explicit_lengths_win_and_contradictions_warn_with_both_numbers(tmp_path):
    base = _base_with_meta(tmp_path, {"model_config": {"sequence_len": 256}})
    spec = load_spec(
        None,
        base_dir=base.root,
        results_dir=tmp_path / "r",
        from_step=21400,
        variants="pi",
        seq_len=128,
        target_len=512,
    )
    info = read_base_info(base, "d20", 21400)
    assert info.data_start is None  # the base records no loader position
    (run,) = plan_continue(spec, info)
    assert (run.train.seq_len, run.rope.factor) == (128, 2.0)
    (warning,) = length_warnings(resolve_lengths(spec, info), info)
    assert "128" in warning and "L0=256" in warning


def test_rlab_loader_state_and_missing_meta(tmp_path):
    state = {"world_size": 2, "ranks": [{"epoch": 0, "slot": 2, "doc": 0, "tok": 0}, {"slot": 3}]}
    base = _base_with_meta(
        tmp_path, {"model_config": {"sequence_len": 256}, "loader_state": state}, tag="demo", step=5
    )
    start = read_base_info(base, "demo", 5).data_start
    assert start.source == "rlab" and start.loader_state == state and "slot 2" in start.describe()
    with pytest.raises(CheckpointError, match="No meta for demo@6"):
        read_base_info(base, "demo", 6)


@needs_nanochat_reference(REF)
def test_the_real_nanochat_meta(tmp_path):
    base = BaseLayout(tmp_path / "base")
    base.checkpoint_dir("d2").mkdir(parents=True)
    shutil.copy(REF / "base_checkpoints" / "d2" / "meta_000020.json", base.checkpoint_dir("d2"))
    info = read_base_info(base, "d2", 20)
    assert info.sequence_len == 256
    assert (info.data_start.pq_idx, info.data_start.rg_idx, info.data_start.epoch) == (0, 2, 6)


def test_a_seq_len_warmup_is_checked_against_the_target_length_it_trains_at(tmp_path):

    base = _base_with_meta(tmp_path, {"model_config": {"sequence_len": 768}})
    info = read_base_info(base, "d20", 21400)
    spec = load_spec(None, base_dir=base.root, results_dir=tmp_path / "r", from_step=21400, variants="pi")
    # 768 does not divide the default 1024 but divides the target (4 x 768): fine until the target is known
    fits = spec.model_copy(update={"train": TrainSpec(seq_len_warmup=[{"seq_len": 768, "steps": 2}])})
    (run,) = plan_continue(fits, info)
    assert run.train.seq_len == 3072 and run.train.seq_len_at(0) == 768
    misfit = spec.model_copy(update={"train": TrainSpec(seq_len_warmup=[{"seq_len": 1000, "steps": 2}])})
    with pytest.raises(SpecError, match="target length 3072"):
        plan_continue(misfit, info)
