"""The checkpoint meta contract: nanochat's metas of both generations and rlab's own load through one model and
are written back key for key (unknown keys included); a bad field is one error naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlab.core.checkpoint_meta import CheckpointMeta, load_meta, meta_text, read_meta, write_meta
from rlab.errors import CheckpointError
from rlab.spec.rope import RopeSpec
from tests.conftest import REPO_ROOT, nanochat_reference_path

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "nanochat_meta"
VENDORED = sorted(FIXTURES.glob("*.json"))
WRITTEN_BY_NANOCHAT = [
    nanochat_reference_path(v) / sub
    for v in ("d314e96", "head")
    for sub in ("base_checkpoints/d2/meta_000020.json", "resumed/meta_000021.json")
]


@pytest.mark.parametrize("path", VENDORED, ids=lambda p: p.name)
def test_vendored_copies_are_the_reference_files(path: Path) -> None:
    version = "d314e96" if path.name.startswith("d314e96") else "head"
    original = nanochat_reference_path(version) / "base_checkpoints/d2/meta_000020.json"
    if not original.exists():
        pytest.skip("needs $RLAB_NANOCHAT_REFERENCE to compare the copies with")
    assert path.read_bytes() == original.read_bytes()


@pytest.mark.parametrize("path", VENDORED + WRITTEN_BY_NANOCHAT, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_nanochat_metas_load_and_round_trip_byte_for_byte(path: Path) -> None:
    if not path.exists():
        pytest.skip("needs checkpoints written by nanochat: set $RLAB_NANOCHAT_REFERENCE")
    meta = load_meta(path)
    assert meta_text(meta).rstrip("\n") == path.read_text().rstrip("\n")  # nanochat writes no final newline
    raw = json.loads(path.read_text())
    assert meta.step == raw["step"] and meta.sequence_len == 256
    assert meta.dataloader_state_dict is not None and meta.dataloader_state_dict.pq_idx == 0
    # nanochat bases count their tokens as step x total_batch_size; plain rope at their own length
    assert meta.tokens_behind() == raw["step"] * raw["user_config"]["total_batch_size"]
    assert meta.rope_spec() == RopeSpec(original_len=256)
    assert meta.shape.window_pattern == raw["model_config"].get("window_pattern")


def test_generations_differ_where_nanochat_changed_its_meta() -> None:
    old = load_meta(FIXTURES / "d314e96_meta_000020.json")
    new = load_meta(FIXTURES / "92d63d4_meta_000020.json")
    assert old.shape.window_pattern is None and new.shape.window_pattern == "SSSL"
    assert old.total_batch_size is None and new.total_batch_size == 2048
    assert old.dataloader_state_dict.epoch is None and new.dataloader_state_dict.epoch == 6
    assert new.user_config.model_extra["fp8_recipe"] == "tensorwise"  # kept, though rlab reads none of it


def test_unknown_keys_survive_and_new_keys_follow_the_file_order(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "92d63d4_meta_000020.json").read_text())
    data["from_a_newer_nanochat"] = {"x": [1, 2]}
    data["model_config"]["some_new_knob"] = 3
    meta = CheckpointMeta.model_validate(data)
    clone = meta.model_copy(update={"tag": "d2-pi", "rope": RopeSpec(variant="pi", factor=2.0)})
    ckpt = tmp_path / "d2-pi"
    write_meta(ckpt, 20, clone)
    back = json.loads((ckpt / "meta_000020.json").read_text())
    assert list(back) == [*data, "rope", "tag"]
    assert back["from_a_newer_nanochat"] == {"x": [1, 2]} and back["model_config"]["some_new_knob"] == 3
    assert back["rope"]["variant"] == "pi"


def test_an_older_rlab_meta_still_loads() -> None:
    """Keys rlab no longer writes (model_config's architecture, optimizer.file) ride along as extras."""
    meta = CheckpointMeta.model_validate(
        {
            "step": 4,
            "model_config": {
                "sequence_len": 32,
                "vocab_size": 64,
                "n_layer": 1,
                "n_head": 1,
                "n_kv_head": 1,
                "n_embd": 8,
                "architecture": "nanochat-2025",
                "rotary_base": None,
            },
            "optimizer": {
                "format": "rlab.optim/1",
                "file": "optim_000004_rank0.pt",
                "world_size_independent": True,
            },
            "run_config": {
                "experiment": "e",
                "tag": "t",
                "train": {"seed": 7, "data_start": "after_base"},
                "data_start": None,
                "some_removed_field": 1,
            },
            "train_state": {
                "run_key": "e/t<-scratch",
                "run_start_step": 0,
                "lr_policy": {"peak_lr_scale": 1.0, "warmup_steps": 2},
            },
        }
    )
    assert meta.optimizer.model_extra == {"file": "optim_000004_rank0.pt", "world_size_independent": True}
    assert meta.train_seed == 7 and meta.experiment_name == "e" and meta.owner("t") == "e"
    assert meta.data_start_label is None  # run_config.data_start recorded as null: that is the record
    assert meta.train_state.lr_policy.warmup_steps == 2


def test_data_start_label_looks_where_each_rlab_generation_wrote_it() -> None:
    shape = {"sequence_len": 8, "vocab_size": 8, "n_layer": 1, "n_head": 1, "n_kv_head": 1, "n_embd": 8}

    def label(**fields: object) -> str | None:
        return CheckpointMeta.model_validate({"step": 1, "model_config": shape, **fields}).data_start_label

    assert label(data_start={"source": "beginning"}) == "beginning"
    assert (
        label(data_start={"source": "nanochat", "describe": "after d20@5 (pq 1, rg 2)"})
        == "after d20@5 (pq 1, rg 2)"
    )
    assert label(data_start=None) is None
    assert label(run_config={"train": {"data_start": "after_base"}}) == "after_base"
    hashed = label(run_config={"data_start": {"source": "nanochat", "tag": "d20", "step": 5}})
    assert hashed is not None and len(hashed) == 12
    assert label() is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"step": 5, "model_config": ', "unreadable meta JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"step": 5}', "meta model_config: Field required"),
        (
            '{"step": 5, "model_config": {"sequence_len": true, "vocab_size": 8, "n_layer": 1, "n_head": 1, '
            '"n_kv_head": 1, "n_embd": 8}}',
            "meta model_config.sequence_len",
        ),
        (
            '{"step": 5, "model_config": {"sequence_len": 8, "vocab_size": 8, "n_layer": 1, "n_head": 1, '
            '"n_kv_head": 1, "n_embd": 8, "window_pattern": "SXL"}}',
            "must be letters S and L",
        ),
        (
            '{"step": 5, "model_config": {"sequence_len": 8, "vocab_size": 8, "n_layer": 1, "n_head": 1, '
            '"n_kv_head": 1, "n_embd": 8}, "rope": {"variant": "pi", "factor": -2}}',
            "meta rope",
        ),
    ],
)
def test_a_bad_meta_is_one_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "meta_000005.json"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=message) as err:
        load_meta(path)
    assert str(path) in err.value.message


def test_read_meta_wants_a_complete_checkpoint(tmp_path: Path) -> None:
    write_meta(tmp_path, 3, load_meta(FIXTURES / "d314e96_meta_000020.json"))
    with pytest.raises(CheckpointError, match=r"No complete checkpoint for step 3 .*found: none"):
        read_meta(tmp_path, 3)  # a meta without its model file is not a checkpoint
