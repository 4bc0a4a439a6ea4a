"""The preflight's memory check: a GPU launch whose plan does not fit is refused with the batch that fits;
a CPU launch is not planned. GPUs are "visible" here through CUDA_VISIBLE_DEVICES (no GPU is used: the
plan is traced on the CPU)."""

from __future__ import annotations

import json

import pytest

from rlab.orchestrate.memory_check import plan_continue_memory
from rlab.orchestrate.preflight import preflight_continue
from tests.cli.harness import run_main
from tests.orchestrate.helpers import d20_continue_spec


@pytest.fixture
def spec(tmp_path):
    spec = d20_continue_spec(tmp_path, nproc=2)
    train = spec.train.model_copy(
        update={"device_batch_size": 8, "total_batch_size": 8 * 1024 * 2, "compile": False}
    )
    return spec.model_copy(update={"train": train})


def _with_gpu_memory(spec, gib: float):
    return spec.model_copy(update={"launch": spec.launch.model_copy(update={"gpu_memory_gib": gib})})


def _with_train(spec, **update):
    return spec.model_copy(update={"train": spec.train.model_copy(update=update)})


def test_a_plan_past_the_gpu_names_the_largest_batch_that_fits(spec, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    spec = _with_train(spec, activation_checkpointing="off")
    first = preflight_continue(_with_gpu_memory(spec, 80))
    assert first.ok and first.memory is not None and first.memory.fits
    full = first.memory.peak_gib
    assert first.memory.shape.nproc == 2 and first.memory.shape.seq_len == 1024
    quarter = plan_continue_memory(_with_train(spec, device_batch_size=2), first.base)[0].peak_gib
    pf = preflight_continue(_with_gpu_memory(spec, (full + quarter) / 2 / 0.9))
    assert not pf.ok
    problem = pf.problems[0]
    assert (
        "d20-pi and 1 more: the memory plan needs" in problem
        and "device_batch_size 8 x seq_len 1024" in problem
    )
    assert "Set train.device_batch_size: 4 (2 accumulation steps keep total_batch_size 16,384" in problem


def test_a_cpu_launch_is_not_planned(spec, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    pf = preflight_continue(_with_gpu_memory(spec, 0.001))  # would not fit any GPU: irrelevant on a CPU
    assert pf.ok and pf.memory is None


def test_the_dry_run_shows_each_tags_peak(spec, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    args = ["continue", "--base-dir", str(tmp_path / "base"), "--results-dir", str(tmp_path / "res")]
    args += ["--from-step", "10", "--variants", "pi", "--nproc", "2", "--dry-run"]
    table = run_main(*args)
    assert table.code == 0, table.text
    assert "GiB/rank" in table.out and "memory per rank (`rlab memory`): peak" in table.out
    plan = json.loads(run_main(*args, "--json").out)
    assert plan["tags"][0]["peak_gib"] == plan["memory"]["peak_gib"] > 0
    assert plan["memory"]["shape"]["device"] == "cuda"


def test_auto_checkpointing_is_chosen_by_the_plan_and_said(spec, monkeypatch):
    """Between the peaks without and with every block checkpointed, auto picks checkpointing at the
    configured batch, the runs train with it, and the dry run's notes say so."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    first = preflight_continue(_with_gpu_memory(spec, 80))
    assert first.memory is not None and first.memory.shape.activation_checkpointing == "off"
    assert all(run.train.activation_checkpointing == "off" for run in first.runs)  # resolved in run.json
    everything = plan_continue_memory(_with_train(spec, activation_checkpointing="all"), first.base)[0]
    pf = preflight_continue(_with_gpu_memory(spec, (first.memory.peak_gib + everything.peak_gib) / 2 / 0.9))
    assert pf.ok and pf.memory is not None and pf.memory.fits
    chosen = pf.memory.shape.activation_checkpointing
    assert chosen != "off" and pf.memory.shape.device_batch_size == 8
    assert all(run.train.activation_checkpointing == chosen for run in pf.runs)
    assert any(f"activation checkpointing {chosen} (auto)" in note for note in pf.notes)
