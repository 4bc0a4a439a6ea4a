"""`rlab continue` on a base of an architecture rlab does not know: one error naming the keys, no clone."""

from __future__ import annotations

import json

import torch

from rlab.nanochat.gen2025.architecture import NANOCHAT_2025
from rlab.nanochat.state_dict import state_dict_keys
from rlab.paths import BaseLayout, meta_file, model_file
from tests.cli.harness import assert_user_error, run_main
from tests.orchestrate.helpers import continue_from, fake_torchrun, snapshot, spec_args, write_spec


def _base_with_keys(root, extra: list[str]) -> BaseLayout:
    """A d2 checkpoint whose state dict is nanochat-2025's keys (tiny tensors: only keys are inspected) + `extra`."""
    layout = BaseLayout(root)
    ckpt = layout.checkpoint_dir("d2")
    ckpt.mkdir(parents=True)
    keys = sorted(state_dict_keys(NANOCHAT_2025, 2)) + extra
    torch.save({k: torch.zeros(1) for k in keys}, model_file(ckpt, 20))
    config = {"sequence_len": 64, "vocab_size": 512, "n_layer": 2, "n_head": 2, "n_kv_head": 2, "n_embd": 32}
    meta_file(ckpt, 20).write_text(json.dumps({"step": 20, "model_config": config}))
    return layout


def test_unknown_architecture_is_refused_before_any_clone(tmp_path):
    base = _base_with_keys(tmp_path / "base", ["transformer.h.0.attn.new_gate.weight", "mystery_lambdas"])
    before = snapshot(base.checkpoint_dir("d2"))
    spec = write_spec(tmp_path, f"name: arch\nlaunch: {{torchrun: {fake_torchrun(tmp_path)}}}\n")
    args = [*spec_args(spec, base.root, tmp_path / "res"), "--base-tag", "d2", *continue_from(20, "pi,yarn")]
    result = run_main("continue", *args)
    assert_user_error(
        result,
        "unknown architecture",
        "unknown keys: mystery_lambdas, transformer.h.0.attn.new_gate.weight",
        "nanochat-2025",
        "nanochat-2026",
    )
    assert "launched" not in result.out
    assert sorted(p.name for p in base.checkpoints_root.iterdir()) == ["d2"]  # no clone left behind
    assert snapshot(base.checkpoint_dir("d2")) == before
