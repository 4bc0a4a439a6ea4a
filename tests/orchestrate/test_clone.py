"""Cloning: hardlink vs copy, the source is never touched, atomic, and refuse/force/resume."""

from __future__ import annotations

import json
import os

import pytest

from rlab.core.architecture import window_sizes
from rlab.core.checkpoint_meta import CheckpointMeta
from rlab.core.gpt import GPTConfig
from rlab.errors import CheckpointError
from rlab.orchestrate import clone as clone_mod
from rlab.orchestrate.clone import (
    checkpoint_steps,
    clone_checkpoint,
    clone_meta,
    list_tags,
    require_checkpoint,
    tag_action,
)
from rlab.orchestrate.plan import plan_continue
from rlab.orchestrate.tag_setup import apply_tag_plans, tag_plans
from rlab.paths import BaseLayout, meta_file, model_file, optim_file
from rlab.spec.loading import load_spec
from rlab.spec.rope import RopeSpec
from tests.orchestrate.helpers import make_checkpoint, snapshot

YARN = RopeSpec(variant="yarn", factor=4)


@pytest.fixture
def base(tmp_path):
    make_checkpoint(tmp_path / "base", "d20", steps=(10, 20), ranks=2)
    return BaseLayout(tmp_path / "base")


@pytest.mark.parametrize("method", ["auto", "hardlink", "copy"])
def test_clone_contents_and_source_untouched(base, method):
    src = base.checkpoint_dir("d20")
    before = snapshot(src)
    result = clone_checkpoint(base, "d20", 20, "d20-yarn", rope=YARN, variant="yarn", method=method)
    dst = base.checkpoint_dir("d20-yarn")
    assert result.path == dst and result.files == 4
    assert sorted(p.name for p in dst.iterdir()) == sorted(
        p.name
        for p in (model_file(dst, 20), meta_file(dst, 20), optim_file(dst, 20, 0), optim_file(dst, 20, 1))
    )
    assert model_file(dst, 20).read_bytes() == model_file(src, 20).read_bytes()
    linked = os.path.samefile(model_file(dst, 20), model_file(src, 20))
    assert linked == (method != "copy")
    assert result.method == ("copy" if method == "copy" else "hardlink")
    # The meta is always a fresh file: lineage + the variant's RoPE with L0 from the source.
    assert not os.path.samefile(meta_file(dst, 20), meta_file(src, 20))
    meta = json.loads(meta_file(dst, 20).read_text())
    assert meta["lineage"] == {"parent_tag": "d20", "parent_step": 20}
    assert (meta["tag"], meta["variant"], meta["parent_rope"]) == ("d20-yarn", "yarn", None)
    assert RopeSpec.model_validate(meta["rope"]) == YARN.with_original_len(256)
    assert meta["model_config"]["sequence_len"] == 256
    assert snapshot(src) == before
    assert list_tags(base) == ["d20", "d20-yarn"] and checkpoint_steps(dst) == [20]


def test_copy_fallback_when_links_fail(base, monkeypatch):
    def no_link(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(clone_mod.os, "link", no_link)
    result = clone_checkpoint(base, "d20", 10, "d20-pi", rope=RopeSpec(variant="pi", factor=4), variant="pi")
    assert result.method in ("reflink", "copy")  # reflink where the filesystem shares extents
    assert not os.path.samefile(model_file(result.path, 10), model_file(base.checkpoint_dir("d20"), 10))
    with pytest.raises(CheckpointError, match="Cannot hard-link"):
        clone_checkpoint(base, "d20", 10, "d20-ntk", rope=YARN, variant="ntk", method="hardlink")


def test_interrupted_clone_leaves_nothing(base, monkeypatch):
    calls = []
    real = clone_mod._link_or_copy

    def flaky(src, dst, method):
        calls.append(src)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the clone
        return real(src, dst, method)

    monkeypatch.setattr(clone_mod, "_link_or_copy", flaky)
    before = snapshot(base.checkpoint_dir("d20"))
    with pytest.raises(KeyboardInterrupt):
        clone_checkpoint(base, "d20", 10, "d20-pi", rope=YARN, variant="pi")
    assert sorted(p.name for p in base.checkpoints_root.iterdir()) == ["d20"]  # no tag, no temp folder
    assert snapshot(base.checkpoint_dir("d20")) == before


def test_missing_step_and_tag_errors(base):
    with pytest.raises(CheckpointError) as info:
        require_checkpoint(base, "d20", 15)
    assert "No checkpoint for step 15" in info.value.message and "(found: 10, 20)" in info.value.message
    assert info.value.hint == "Choose one with --from-step."
    with pytest.raises(CheckpointError, match="Unknown base tag 'd2'. Did you mean 'd20'?"):
        require_checkpoint(base, "d2", 10)
    # a step whose model file is missing is incomplete, not listed
    model_file(base.checkpoint_dir("d20"), 20).unlink()
    assert checkpoint_steps(base.checkpoint_dir("d20")) == [10]


@pytest.mark.parametrize(
    ("exists", "resume", "force", "action"),
    [
        (False, False, False, "clone"),
        (False, True, False, "clone"),
        (False, False, True, "clone"),
        (True, False, False, "refuse"),
        (True, True, False, "resume"),
        (True, False, True, "replace"),
    ],
)
def test_tag_action(exists, resume, force, action):
    assert tag_action(exists, resume=resume, force=force) == action


def test_refuse_force_resume_end_to_end(base, tmp_path):
    spec = load_spec(
        None, base_dir=base.root, results_dir=tmp_path / "results", from_step=10, variants="pi,yarn"
    )
    runs = plan_continue(spec)
    launched = apply_tag_plans(spec, tag_plans(spec, runs, resume=False, force=False))
    assert [r.resume for r in launched] == [False, False]
    pi_dir = base.checkpoint_dir("d20-pi")
    (pi_dir / "model_000011.pt").write_bytes(b"trained")  # the variant trained a step
    (pi_dir / "meta_000011.json").write_text("{}")
    with pytest.raises(CheckpointError) as info:
        tag_plans(spec, runs, resume=False, force=False)
    assert "Tag 'd20-pi' already exists" in info.value.message and "steps: 10, 11" in info.value.message
    assert "--resume" in info.value.hint and "--force" in info.value.hint
    resumed = apply_tag_plans(spec, tag_plans(spec, runs, resume=True, force=False))
    assert [r.resume for r in resumed] == [True, True]
    assert checkpoint_steps(pi_dir) == [10, 11]  # resume keeps everything
    plans = tag_plans(spec, runs, resume=False, force=True)
    assert pi_dir in plans[0].delete
    before = snapshot(base.checkpoint_dir("d20"))
    apply_tag_plans(spec, plans)
    assert checkpoint_steps(pi_dir) == [10]  # replaced by a fresh clone
    assert snapshot(base.checkpoint_dir("d20")) == before  # unlinking the old clone never touches the base
    with pytest.raises(CheckpointError, match="contradict"):
        tag_plans(spec, runs, resume=True, force=True)


def test_a_clone_keeps_the_sources_own_rotary_base():
    """A variant that leaves its base to the checkpoint gets the source's recorded base (a base pretrained
    with `rotary_base`); an explicit base wins; a nanochat source (no rope in its meta) leaves it to the
    architecture."""

    shape = {"sequence_len": 256, "vocab_size": 512, "n_layer": 2, "n_head": 1, "n_kv_head": 1, "n_embd": 64}
    meta = CheckpointMeta.model_validate(
        {"step": 1, "model_config": shape, "rope": {"variant": "rope", "base": 600.0, "original_len": 256}}
    )
    kw = dict(src_tag="b", step=1, dst_tag="b-yarn", variant="yarn")
    assert clone_meta(meta, rope=YARN, **kw).rope.base == 600.0
    assert clone_meta(meta, rope=YARN.model_copy(update={"base": 5e5}), **kw).rope.base == 5e5
    nanochat = clone_meta(
        CheckpointMeta.model_validate({"step": 1, "model_config": shape}), rope=YARN, **kw
    ).rope
    assert nanochat.base is None and nanochat.original_len == 256


def test_a_training_free_arm_is_the_variant_at_the_target_length():
    """A zero-shot clone of a nanochat-2026 base takes the target length, so its attention windows reach as far
    as the continued arm's; L0 stays the source's. Without the length the clone keeps the source's."""

    config = {
        "sequence_len": 256,
        "vocab_size": 512,
        "n_layer": 2,
        "n_head": 1,
        "n_kv_head": 1,
        "n_embd": 64,
        "window_pattern": "SL",
        "architecture": "nanochat-2026",
    }
    meta = CheckpointMeta.model_validate({"step": 1, "model_config": config})
    kw = dict(src_tag="b", step=1, dst_tag="b-yarn-zeroshot", rope=YARN, variant="yarn")
    free = clone_meta(meta, sequence_len=1024, **kw)
    model = GPTConfig.from_dict(free.shape.nanochat_kwargs())
    assert window_sizes(model.window_pattern, model.n_layer, model.sequence_len) == [256, 1024]
    assert free.rope.original_len == 256
    assert meta.sequence_len == 256  # the source's meta is not touched
    assert clone_meta(meta, **kw).sequence_len == 256
