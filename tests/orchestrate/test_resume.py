"""A resume at another world size keeps the global batch by gradient accumulation when it divides, else says
what changes; the batch a run trained with comes from its own newest checkpoint."""

from __future__ import annotations

import json

from rlab.core.train_start import run_key
from rlab.orchestrate.launch import with_default_nproc
from rlab.orchestrate.preflight import preflight_continue
from rlab.orchestrate.resume import keep_global_batch
from rlab.orchestrate.tag_setup import apply_tag_plans, tag_plans
from rlab.paths import BaseLayout, meta_file
from rlab.spec.loading import load_spec
from tests.orchestrate.helpers import make_checkpoint


def _resumable(tmp_path, nproc: int, device_batch_size: int = 2):
    """A tag d20-pi whose step 30 this run saved on 2 processes at device_batch_size 2 x seq_len 128."""
    base = BaseLayout(tmp_path / "base")
    make_checkpoint(base.root, "d20", steps=(20,))
    spec = load_spec(
        None, base_dir=base.root, results_dir=tmp_path / "res", from_step=20, variants="pi", nproc=nproc
    )
    spec = spec.model_copy(
        update={
            "train": spec.train.model_copy(update={"seq_len": 128, "device_batch_size": device_batch_size})
        }
    )
    run = preflight_continue(with_default_nproc(spec, [])).runs[0]
    tag_dir = make_checkpoint(base.root, "d20-pi", steps=(20, 30))
    trained = {"train": {"device_batch_size": 2, "seq_len": 128, "total_batch_size": None}}
    meta = {
        "step": 30,
        "model_config": json.loads(meta_file(tag_dir, 30).read_text())["model_config"],
        "world_size": 2,
        "run_config": trained,
        "train_state": {"run_key": run_key(run)},
    }
    meta_file(tag_dir, 30).write_text(json.dumps(meta))
    return run, tag_dir


def test_one_process_keeps_the_batch_of_two_by_accumulation(tmp_path):
    run, tag_dir = _resumable(tmp_path, nproc=1)
    kept, line = keep_global_batch(run, tag_dir, world_size=1)
    assert (
        kept.train.total_batch_size == 512
    )  # 2 x 128 x 2 ranks, now 2 x 128 x 1 rank x 2 accumulation steps
    assert line is not None and "stays 512 tokens/step, by 2 gradient accumulation step(s)" in line


def test_a_batch_that_cannot_be_kept_is_said(tmp_path):
    run, tag_dir = _resumable(tmp_path, nproc=4)
    same, line = keep_global_batch(run, tag_dir, world_size=4)  # 2 x 128 x 4 = 1024 > 512: no accumulation
    assert same is run and line is not None
    assert "1,024 tokens per step instead of 512" in line and "--nproc 2" in line


def test_the_same_world_size_changes_nothing(tmp_path):
    run, tag_dir = _resumable(tmp_path, nproc=2)
    assert keep_global_batch(run, tag_dir, world_size=2) == (run, None)


def test_the_preflight_applies_it_and_the_console_says_so(tmp_path):
    run, tag_dir = _resumable(tmp_path, nproc=1)
    spec = load_spec(
        None, base_dir=tmp_path / "base", results_dir=tmp_path / "res", from_step=20, variants="pi", nproc=1
    )
    spec = spec.model_copy(
        update={"train": spec.train.model_copy(update={"seq_len": 128, "device_batch_size": 2})}
    )
    pf = preflight_continue(spec, resume=True)
    assert pf.runs[0].train.total_batch_size == 512
    assert any("stays 512 tokens/step" in note for note in pf.notes)


def test_a_resume_removes_the_temp_files_a_killed_save_left(tmp_path):
    """Issue 42, finding 7: a save killed mid-write left a 5 MB `.tmp` beside the checkpoints forever, even after a
    successful resume. The resume (under the tag's lock, before its job starts) removes them."""

    run, tag_dir = _resumable(tmp_path, nproc=2)
    stale = tag_dir / ".model_000040.pt.k2j3h4.tmp"
    stale.write_bytes(b"\0" * 4096)
    spec = load_spec(
        None, base_dir=tmp_path / "base", results_dir=tmp_path / "res", from_step=20, variants="pi"
    )
    plans = tag_plans(spec, [run], resume=True, force=False)
    (resumed,) = apply_tag_plans(spec, plans)
    assert resumed.resume and not stale.exists()
    assert sorted(p.name for p in tag_dir.iterdir() if p.name.startswith("meta_")) == [
        "meta_000020.json",
        "meta_000030.json",
    ]
