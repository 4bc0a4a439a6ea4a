"""`rlab memory`: the plan from a nanochat d20 meta (the fixture) and from a tag, as a table and as JSON."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from rlab.nanochat.gen2025.architecture import NANOCHAT_2025
from rlab.nanochat.state_dict import state_dict_keys
from tests.cli.harness import run_main
from tests.conftest import REPO_ROOT
from tests.memory.conftest import D20_META


@pytest.mark.slow  # d20 under fake tensors: about 15 s on a shared 2-core CPU
def test_json_from_a_d20_meta_at_a_small_shape():
    res = run_main(
        "memory", "--meta", str(D20_META), "--seq-len", "256", "--device-batch-size", "1", "--nproc", "8",
        "--gpu-memory", "80", "--eager", "--json",
    )  # fmt: skip
    assert res.code == 0, res.text
    plan = json.loads(res.out)
    assert plan["shape"]["config"]["n_layer"] == 20 and plan["shape"]["config"]["vocab_size"] == 65536
    assert plan["shape"]["nproc"] == 8 and plan["shape"]["compile"] is False
    # d20: 561M parameters, fp32 but for wte (84M), bf16 on CUDA as nanochat keeps it: about 1.93 GiB
    assert 1.90 < plan["parameters_gib"] < 1.96
    assert plan["optimizer_gib"] < 0.5  # sharded across the 8 ranks
    assert plan["ddp_bucket_view"] and plan["ddp_buckets_gib"] == 0  # gradients live in DDP's buckets
    assert plan["fits"] is True and plan["peak_gib"] < plan["budget_gib"] == 72.0
    assert plan["activations_gib"] == plan["eager_activations_gib"] > 0


def test_table_from_a_tag_and_its_accumulation(tmp_path):
    base = tmp_path / "base"
    ckpt = base / "base_checkpoints" / "d2"
    ckpt.mkdir(parents=True)
    meta = json.loads(D20_META.read_text())
    meta["model_config"].update(n_layer=2, n_embd=128, n_head=2, n_kv_head=2, vocab_size=512)
    (ckpt / "meta_000020.json").write_text(json.dumps(meta))
    _write_keys(ckpt / "model_000020.pt", n_layer=2)
    res = run_main(
        "memory", "--tag", "d2", "--base-dir", str(base), "--seq-len", "128", "--device-batch-size", "2",
        "--total-batch-size", "1024", "--eager",
    )  # fmt: skip
    assert res.code == 0, res.text
    assert "d2@20" in res.out and "accumulation 4" in res.out
    assert "peak" in res.out and "fits" in res.out


def test_eval_plan_json():
    res = run_main("memory", "--meta", str(D20_META), "--seq-len", "512", "--eval", "--json")
    assert res.code == 0, res.text
    plan = json.loads(res.out)
    assert plan["shape"]["longest"] == 1024  # 2 x the training length
    assert plan["prefill"]["kv_cache_gib"] > 0 and plan["peak_gib"] >= plan["parameters_gib"]


def test_needs_exactly_one_source():
    assert run_main("memory").code == 2
    assert run_main("memory", "--meta", str(D20_META), "--tag", "d20").code == 2


def test_a_missing_meta_is_one_line():
    res = run_main("memory", "--meta", "/nonexistent/meta_000001.json")
    assert res.code == 1 and res.exception is None
    assert "Meta file not found" in res.err


def _write_keys(path, n_layer: int) -> None:
    """A model file with nanochat-2025's state-dict keys (tiny tensors: only the keys are read, for the
    architecture)."""

    torch.save({k: torch.zeros(1) for k in state_dict_keys(NANOCHAT_2025, n_layer)}, path)


@pytest.mark.slow  # d20 at 8 x 8192 with its torch.compile count: about a minute on a shared 2-core CPU
def test_the_shipped_d20_spec_fits_an_80_gib_gpu():
    """d20 at the shipped spec's device batch x 8192 per rank on 8 ranks plans <= 72 GiB (room on an 80 GiB
    GPU)."""

    train = yaml.safe_load((REPO_ROOT / "experiments" / "rope_scaling_d20.yaml").read_text())["train"]
    res = run_main(
        "memory", "--meta", str(D20_META), "--seq-len", str(train["seq_len"]),
        "--device-batch-size", str(train["device_batch_size"]), "--total-batch-size", str(train["total_batch_size"]),
        "--nproc", "8", "--gpu-memory", "80", "--json",
    )  # fmt: skip
    assert res.code == 0, res.text
    plan = json.loads(res.out)
    assert plan["shape"]["compile"] is True and plan["compiled_activations_gib"] is not None
    assert plan["peak_gib"] <= 72.0 and plan["fits"] is True


@pytest.mark.slow  # d20 at 128k with its torch.compile count, three plans: minutes on a shared 2-core CPU
def test_d20_at_128k_fits_80_gib_with_activation_checkpointing():
    """The issue's shape: one row of 131,072 tokens per rank on 8 ranks does not fit 80 GiB plainly; the plan
    names the least checkpointing that does, and no remedy that would not help (more GPUs)."""
    res = run_main(
        "memory", "--meta", str(D20_META), "--seq-len", "131072", "--device-batch-size", "1", "--nproc", "8",
        "--gpu-memory", "80",
    )  # fmt: skip
    assert res.code == 0, res.text
    assert "does not fit" in res.out and "fits with activation checkpointing" in res.out
    assert "more GPUs" not in res.out


def test_nothing_fitting_names_only_remedies_that_help():
    """A GPU too small for one row even with every block checkpointed: a shorter length or a larger GPU."""
    res = run_main(
        "memory", "--meta", str(D20_META), "--seq-len", "256", "--device-batch-size", "1", "--nproc", "8",
        "--gpu-memory", "1", "--eager",
    )  # fmt: skip
    assert res.code == 0, res.text
    text = " ".join(res.out.split())
    assert "Not even one row per micro-batch fits, even with every block checkpointed: use" in text
    assert "a shorter seq_len, or a GPU with more memory" in text
    assert "more GPUs" not in text
