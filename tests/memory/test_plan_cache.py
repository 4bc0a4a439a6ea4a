"""The plan cache: a shape is counted once per code version, read back without torch, keyed by everything
the counts depend on; a corrupt file is ignored and rewritten; the cache lives where rlab.paths says."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rlab.memory import plan as plan_module
from rlab.memory import plan_cache
from rlab.memory.plan import plan_training
from rlab.memory.shape import TrainShape
from rlab.paths import cache_root, memory_plan_cache_dir
from tests.memory.conftest import small_config


def _shape(**update) -> TrainShape:
    shape = TrainShape(
        config=small_config(n_layer=2, n_embd=64, seq_len=128),
        seq_len=128,
        device_batch_size=2,
        compile=False,
    )
    return shape.model_copy(update=update)


def _files() -> list[Path]:
    return sorted(memory_plan_cache_dir().glob("*.json"))


def _no_counting(shape: TrainShape):
    raise AssertionError(f"counted {shape.describe()} again: the cache should have answered")


def test_a_shape_is_counted_once_then_read_back(monkeypatch):
    first = plan_training(_shape(), 80)
    (path,) = _files()
    entry = plan_cache.PlanCacheFile.model_validate_json(path.read_text())
    assert entry.key == path.stem and entry.shape == _shape() and entry.torch_version
    monkeypatch.setattr(plan_module, "count_step", _no_counting)
    again = plan_training(_shape(), 40)  # another GPU: the same counts, a new budget
    assert again.peak_gib == first.peak_gib and again.budget_gib == 36.0
    assert again.model_dump(exclude={"gpu_memory_gib", "budget_gib"}) == first.model_dump(
        exclude={"gpu_memory_gib", "budget_gib"}
    )


def test_a_corrupt_or_foreign_file_is_ignored_and_rewritten():
    first = plan_training(_shape(), 80)
    (path,) = _files()
    good = path.read_text()
    for bad in ("{not json", json.dumps({**json.loads(good), "counts": {"trace": {}}}), ""):
        path.write_text(bad)
        assert plan_training(_shape(), 80) == first
        assert path.read_text() == good
    other = json.loads(good)
    other["shape"]["device_batch_size"] = 3  # a file whose content is not this key's shape is not trusted
    path.write_text(json.dumps(other))
    assert plan_training(_shape(), 80) == first and path.read_text() == good


def test_the_key_covers_what_the_counts_depend_on(monkeypatch):
    base = plan_cache.plan_key(_shape())
    variants = [
        _shape(nproc=2),
        _shape(dtype="float32"),
        _shape(compile=True),
        _shape(shard_optimizer=False),
        _shape(grad_accum_steps=2),
        _shape(device_batch_size=4),
        _shape(seq_len=64),
        _shape(config=replace(_shape().config, n_embd=128)),
    ]
    keys = {plan_cache.plan_key(s) for s in variants}
    assert base not in keys and len(keys) == len(variants)
    monkeypatch.setattr(plan_cache, "torch_version", lambda: "9.9.9")
    assert plan_cache.plan_key(_shape()) != base
    monkeypatch.undo()
    monkeypatch.setattr(plan_cache, "source_fingerprint", lambda: "changed-code")
    assert plan_cache.plan_key(_shape()) != base


def test_an_unwritable_cache_only_costs_the_next_trace(tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("RLAB_CACHE_DIR", str(blocker))
    assert plan_training(_shape(), 80).peak_gib > 0
    assert blocker.is_file()


def test_a_cached_plan_is_read_without_torch():
    """The second plan of a shape, in a fresh process, answers from the cache and never imports torch."""
    plan_training(_shape(), 80)
    code = (
        "import sys, json\n"
        "from rlab.memory.plan import plan_training\n"
        "from rlab.memory.shape import TrainShape\n"
        "plan = plan_training(TrainShape.model_validate_json(sys.argv[1]), 80)\n"
        "print(json.dumps({'peak': plan.peak_gib, 'torch': 'torch' in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, _shape().model_dump_json()], capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    assert result == {"peak": plan_training(_shape(), 80).peak_gib, "torch": False}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RLAB_CACHE_DIR": "/c/rlab", "XDG_CACHE_HOME": "/x"}, Path("/c/rlab")),
        ({"XDG_CACHE_HOME": "/x"}, Path("/x/rlab")),
        ({}, Path.home() / ".cache" / "rlab"),
    ],
)
def test_the_cache_root_follows_the_environment(monkeypatch, env, expected):
    monkeypatch.delenv("RLAB_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cache_root() == expected
    assert memory_plan_cache_dir() == expected / "memory_plans"
