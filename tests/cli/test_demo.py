"""`rlab demo` end to end at an even smaller size: prepare (copy records) -> pretrain -> go/no-go check ->
continue (torchrun, 2 CPU procs; zero-shot arms) -> eval (incl. copy_distance) -> report."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pandas as pd
import pytest
import yaml

from rlab.data.repeats import RepeatOptions
from rlab.orchestrate.demo import DEMO_SPEC, data_is_stale, demo_stages
from rlab.paths import BaseLayout
from tests.cli.harness import run_main, run_process
from tests.conftest import EVAL_BUNDLE_DIR, make_english_docs
from tests.orchestrate.helpers import spec_args

TINY_DEMO = {
    "name": "tinydemo",
    "base": {"tag": "tiny"},
    "pretrain": {
        "model": {"n_layer": 2, "n_embd": 32, "n_head": 2, "architecture": "nanochat-2026"},
        "train": {
            "seq_len": 128,
            "steps": 6,
            "seq_len_warmup": [{"seq_len": 32, "steps": 2}, {"seq_len": 64, "steps": 2}],
            "device_batch_size": 2,
            "eval_every": 3,
            "eval_tokens": 512,
            "lr": {"warmup_steps": 1},
        },
    },
    "variants": {"rope": {"variant": "rope"}, "yarn": {"variant": "yarn", "factor": 2}},
    "train": {
        "seq_len": 256,
        "steps": 2,
        "zero_shot": True,
        "device_batch_size": 1,
        "eval_every": 2,
        "eval_tokens": 512,
        "lr": {"warmup_steps": 1},
    },
    "eval": {
        "evals": ["bpb", "bpb_length", "core", "passkey", "copy_distance"],
        "bpb_tokens": 512,
        "lengths": [128, 256, 512],
        "length_tokens": 512,
        "max_per_task": 11,
        "passkey_lengths": [256],
        "passkey_trials": 1,
        "passkey_depths": [0.5],
        "copy_trials": 4,
        "device_batch_size": 2,
    },
    "launch": {"nproc_per_node": 2},
    "tracking": {"wandb": "disabled"},
}


def test_demo_stages_are_the_users_commands(tmp_path):
    stages = demo_stages(
        spec=DEMO_SPEC, base_dir=tmp_path / "b", results_dir=tmp_path / "r", eval_bundle=None
    )
    assert [s.name for s in stages] == ["data", "pretrain", "check", "continue", "eval", "report"]
    assert stages[0].argv[-3:] == ["--base-dir", str(tmp_path / "b"), "--copy-records"]
    assert "--no-core" in stages[4].argv  # no bundle: CORE skipped, said so, not silently dropped
    # a rerun over an earlier demo's results (the committed ones in a fresh clone) drops their stale CORE section
    assert stages[4].argv[-1] == "--force"
    assert stages[2].argv is None  # the go/no-go check runs in the demo's own process
    assert all(s.argv[1:3] == ["-m", "rlab"] for s in stages if s.argv is not None)
    again = demo_stages(
        spec=DEMO_SPEC,
        base_dir=tmp_path / "b",
        results_dir=tmp_path / "r",
        eval_bundle=None,
        rebuild_data=True,
    )
    assert again[0].argv[-1] == "--force"  # an older demo's corpus (no copy records) is rebuilt


def test_a_corpus_prepared_with_other_copy_records_is_rebuilt(tmp_path):

    manifest = BaseLayout(tmp_path).corpus_manifest
    assert not data_is_stale(tmp_path)  # nothing prepared yet: the data stage prepares it anyway
    for options, stale in (
        ({}, True),
        ({"copy_records": asdict(replace(RepeatOptions(), record_fraction=3.0))}, True),
        ({"copy_records": asdict(RepeatOptions())}, False),
    ):
        manifest.write_text(json.dumps({"request": {"options": options}}))
        assert data_is_stale(tmp_path) is stale, options


def test_demo_dry_run_touches_nothing(tmp_path):
    result = run_main(
        "demo", "--dry-run", "--base-dir", str(tmp_path / "b"), "--results-dir", str(tmp_path / "r")
    )
    assert result.code == 0, result.text
    assert "rlab pretrain" in result.out.replace("-m rlab pretrain", "rlab pretrain")
    assert not (tmp_path / "b").exists() and not (tmp_path / "r").exists()
    # no bundle anywhere: the demo says how to get one and runs without CORE
    said = " ".join(result.err.split())
    assert "CORE is skipped" in said and "rlab bundle download" in said and "$RLAB_EVAL_BUNDLE" in said
    assert "--no-core" in result.out


def test_demo_finds_the_bundle_through_the_environment_and_refuses_a_wrong_one(tmp_path):
    argv = ["demo", "--dry-run", "--base-dir", str(tmp_path / "b")]
    found = run_main(*argv, env={"RLAB_EVAL_BUNDLE": str(EVAL_BUNDLE_DIR)})
    assert found.code == 0, found.text
    assert f"--eval-bundle {EVAL_BUNDLE_DIR}" in found.out and "CORE is skipped" not in found.err
    wrong = run_main(*argv, "--eval-bundle", str(tmp_path / "nope"))
    assert wrong.code == 1 and wrong.exception is None and "Traceback" not in wrong.err
    assert f"CORE eval bundle not found: {tmp_path / 'nope'}" in " ".join(wrong.err.split())


@pytest.mark.slow
def test_tiny_demo_end_to_end(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, text in enumerate(make_english_docs(60, seed=3)):
        (corpus / f"doc_{i:02d}.txt").write_text(text)
    for i, text in enumerate(make_english_docs(2, seed=4, min_sentences=1300, max_sentences=1350)):
        (corpus / f"long_{i}.txt").write_text(text)
    spec = tmp_path / "tinydemo.yaml"
    spec.write_text(yaml.safe_dump(TINY_DEMO))
    argv = [
        "demo",
        *spec_args(spec, tmp_path / "base", tmp_path / "results"),
        "--corpus",
        str(corpus),
        "--vocab-size",
        "512",
        "--eval-bundle",
        str(EVAL_BUNDLE_DIR),
    ]
    # Six steps teach a tiny model nothing: the go/no-go check stops the demo after pretraining, saying why.
    stopped = run_process(*argv, timeout=900)
    assert stopped.code == 1, stopped.out[-3000:] + stopped.err[-3000:]
    assert "Go/no-go: the base 'tiny' does not use context" in stopped.text
    assert "Traceback" not in stopped.err
    assert not (
        tmp_path / "base" / "base_checkpoints" / "tiny-tinydemo-rope"
    ).exists()  # nothing after the check ran

    # --no-check runs every stage anyway (the pipeline smoke test); the report then says up front that the base
    # does not use context. (The demo's own base passes the check; on this synthetic corpus, whose passages are
    # predictable without copying, a tiny base gains nothing from a repeat even after 300 steps.)
    result = run_process(*argv, "--no-check", timeout=900)
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    assert "no-go" in result.err
    out = tmp_path / "results" / "tinydemo"
    frame = pd.read_csv(out / "results.csv")
    assert sorted(frame["variant"]) == [
        "base",
        "rope",
        "rope",
        "yarn",
        "yarn",
    ]  # continued + zero-shot arms, base
    assert frame["val_bpb"].notna().all()
    for name in ("comparison.md", "demo_timings.csv", "plots/bpb_vs_length.png", "plots/copy_distance.png"):
        assert (out / name).is_file(), name
    copy = pd.read_csv(out / "evals" / "tiny-tinydemo-yarn-zeroshot" / "copy_distance.csv")
    assert sorted(set(copy["window"])) == [128, 256, 512] and len(copy) == 12
    assert "## Long-range use: copy loss by distance" in (out / "comparison.md").read_text()
    timings = pd.read_csv(out / "demo_timings.csv")
    assert list(timings["stage"]) == ["data", "pretrain", "check", "continue", "eval", "report", "total"]
