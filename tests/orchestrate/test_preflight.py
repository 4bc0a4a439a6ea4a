"""The preflight reads the base meta, plans every tag and lists every problem at once."""

from __future__ import annotations

import pytest
import torch

from rlab.orchestrate.preflight import preflight_continue
from rlab.paths import model_file
from tests.orchestrate.helpers import d20_continue_spec


@pytest.fixture
def spec(tmp_path):
    return d20_continue_spec(tmp_path, nproc=1)


def test_a_clean_plan_resolves_lengths_from_the_meta(spec):
    pf = preflight_continue(spec)
    assert pf.ok and pf.base is not None and pf.base.sequence_len == 256
    assert [(r.tag, r.train.seq_len, r.rope.factor, r.rope.original_len) for r in pf.runs] == [
        ("d20-pi", 1024, 4.0, 256),
        ("d20-yarn", 1024, 4.0, 256),
    ]
    assert any("records no data loader position" in w for w in pf.warnings)


def test_the_base_architecture_is_checked_before_anything(spec, tmp_path):

    ckpt = tmp_path / "base" / "base_checkpoints" / "d20"
    model_file(ckpt, 10).write_bytes(b"not a checkpoint")
    pf = preflight_continue(spec)  # unreadable: a warning for a dry run, a problem for a launch
    assert pf.ok and any("cannot read the model file" in w for w in pf.warnings)
    launching = preflight_continue(spec, launching=True)
    assert not launching.ok and "cannot read the model file" in launching.problems[0]
    torch.save({"foo.weight": torch.zeros(2)}, model_file(tmp_path / "base" / "base_checkpoints" / "d20", 10))
    unknown = preflight_continue(spec)
    assert not unknown.ok and "model_000010.pt" in unknown.problems[0]


def test_every_problem_at_once(spec, tmp_path):
    (tmp_path / "base" / "base_checkpoints" / "d20-pi").mkdir()
    bad = spec.model_copy(update={"train": spec.train.model_copy(update={"total_batch_size": 1000})})
    pf = preflight_continue(bad)
    assert len(pf.problems) == 2
    assert "total_batch_size" in pf.problems[0] and "Tag 'd20-pi' already exists" in pf.problems[1]
    assert "2 problems stop this run" in pf.error().message
