"""The eval worker end to end on a tiny base dir: outputs, schemas, re-running replaces, registry."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlab.errors import EvalError
from rlab.evals import outputs
from rlab.evals.registry import get_eval
from rlab.spec.eval import EvalSpec
from rlab.spec.run import EvalRunConfig, write_config
from tests.evals.conftest import random_gpt

TAG = "d2-rope"


def make_base(tiny_base_dir: Path, root: Path, seq_len: int = 32) -> Path:
    """A base dir sharing the tiny corpus/tokenizer, plus a random checkpoint under TAG."""
    from rlab.core.checkpoint import save_checkpoint
    from rlab.core.tokenizer import Tokenizer

    base = root / "base"
    base.mkdir(parents=True)
    for sub in ("base_data", "tokenizer", "long_docs"):
        (base / sub).symlink_to(tiny_base_dir / sub)
    tok = Tokenizer.from_directory(base / "tokenizer")
    model = random_gpt(tok.vocab_size, sequence_len=seq_len, seed=7)
    meta = {"step": 5, "model_config": model.config.to_dict(), "tokens_trained": 1000}
    save_checkpoint(base / "base_checkpoints" / TAG, 5, model.state_dict(), meta)
    return base


def eval_config(base: Path, root: Path, bundle: Path, evals=("bpb", "bpb_length", "core", "passkey")) -> EvalRunConfig:
    spec = EvalSpec(
        evals=evals, bpb_tokens=1024, lengths=(16, 32, 64, 100000), length_tokens=256, core_bundle=bundle,
        max_per_task=6, passkey_lengths=(100,), passkey_depths=(0.0, 1.0), passkey_trials=2, device_batch_size=4,
    )
    return EvalRunConfig(
        experiment="exp", tag=TAG, variant="rope", base_dir=base, out_dir=root / "evals" / TAG,
        core_csv=root / "results_rope.csv", eval=spec,
    )


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_unknown_eval_suggests_a_name():
    with pytest.raises(EvalError, match=r"Unknown eval 'cor'\. Did you mean 'core'\? Available: bpb, bpb_length, copy_distance, core, passkey"):
        get_eval("cor")


def test_atomic_writes_replace_and_leave_no_temp_files(tmp_path):
    outputs.write_json_atomic(tmp_path / "a.json", {"x": float("nan"), "p": Path("/x")})
    outputs.write_json_atomic(tmp_path / "a.json", {"x": 1.5})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 1.5}
    outputs.write_csv_atomic(tmp_path / "b.csv", ("a", "b"), [(1, float("inf"))])
    assert (tmp_path / "b.csv").read_text() == "a,b\n1,\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.csv"]
    with pytest.raises(ValueError):
        outputs.write_csv_atomic(tmp_path / "c.csv", ("a",), [(1, 2)])


def test_run_evals_writes_every_output(tiny_base_dir, tmp_path, bundle_copy):
    import torch

    from rlab.evals.runner import run_evals

    torch.set_num_threads(1)
    base = make_base(tiny_base_dir, tmp_path)
    cfg = eval_config(base, tmp_path, bundle_copy)
    doc = run_evals(cfg)
    out = tmp_path / "evals" / TAG
    saved = json.loads((out / "eval.json").read_text())
    assert saved["schema"] == "rlab.eval/1" and saved["tag"] == TAG and saved["step"] == 5
    assert saved["rope"]["variant"] == "rope" and saved["rope"]["original_len"] == 32
    assert saved["train_seq_len"] == 32 and saved["tokens_trained"] == 1000 and saved["code_version"]
    assert saved["settings"]["max_per_task"] == 6
    m = saved["metrics"]
    assert set(m) == {"bpb", "bpb_length", "core", "passkey"}
    assert set(m["bpb"]) == {"train", "val"} and m["bpb"]["val"]["bpb"] > 0 and m["bpb"]["val"]["tokens"] > 0
    assert [r["length"] for r in m["bpb_length"]["lengths"]] == [16, 32, 64]
    assert m["bpb_length"]["skipped"][0]["length"] == 100000 and "stride" in m["bpb_length"]["convention"]
    assert m["core"]["partial"] and m["core"]["missing_tasks"] == ["squad"]
    assert len(m["passkey"]["cells"]) == 2
    # CSVs with the documented columns
    assert list(read_csv(out / "bpb_by_length.csv")[0]) == list(outputs.BPB_BY_LENGTH_COLUMNS)
    assert len(read_csv(out / "bpb_by_length.csv")) == 3
    assert list(read_csv(out / "passkey.csv")[0]) == list(outputs.PASSKEY_COLUMNS)
    examples = read_csv(out / "core_examples.csv")
    assert len(examples) == 12 and {e["task"] for e in examples} == {"copa", "winograd"}
    per_task = read_csv(tmp_path / "results_rope.csv")
    assert [r["task"] for r in per_task] == ["copa", "winograd"] and list(per_task[0]) == list(outputs.CORE_TASK_COLUMNS)
    units = read_csv(out / "bpb_units.csv")
    assert {u["metric"] for u in units} == {"train", "val", "len_16", "len_32", "len_64"}
    val_units = [u for u in units if u["metric"] == "val"]
    assert sum(float(u["bytes"]) for u in val_units) > 0
    # re-running replaces the outputs (same content, nothing appended)
    before = {p.name: p.read_text() for p in out.iterdir() if p.suffix == ".csv"}
    doc2 = run_evals(cfg)
    after = {p.name: p.read_text() for p in out.iterdir() if p.suffix == ".csv"}
    assert before == after and doc2["metrics"] == doc["metrics"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["eval.json", "bpb_by_length.csv", "passkey.csv", "core_examples.csv", "bpb_units.csv"]
    )


@pytest.mark.slow
def test_torchrun_two_ranks_match_one_process(tiny_base_dir, tmp_path, bundle_copy):
    """Under torchrun (2 CPU ranks, gloo) CORE, BPB-by-length and passkey equal the 1-process run."""
    base = make_base(tiny_base_dir, tmp_path)
    results = {}
    for n in (1, 2):
        cfg = eval_config(base, tmp_path / f"w{n}", bundle_copy, evals=("bpb_length", "core", "passkey"))
        path = tmp_path / f"w{n}" / "eval_run.json"
        write_config(cfg, path)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}", "-m", "rlab.evals", str(path)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[n] = json.loads((tmp_path / f"w{n}" / "evals" / TAG / "eval.json").read_text())
    one, two = results[1]["metrics"], results[2]["metrics"]
    assert one["core"]["tasks"] == two["core"]["tasks"]
    assert one["passkey"]["cells"] == two["passkey"]["cells"]
    for a, b in zip(one["bpb_length"]["lengths"], two["bpb_length"]["lengths"]):
        assert a["tokens"] == b["tokens"] and abs(a["bpb"] - b["bpb"]) < 1e-5
