"""SLURM: exact sbatch script generation; a real single-node cluster as a slow test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlab.orchestrate.slurm import sbatch_script
from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps
from rlab.spec.experiment import LaunchSpec, SlurmSpec
from tests.cli.harness import run_process
from tests.orchestrate.helpers import EXPERIMENTS, pretrained_smoke_base, spec_args
from tests.orchestrate.slurm_cluster import SlurmCluster, unavailable_reason, wait_for_job

EXPECTED_D20 = """#!/bin/bash
#SBATCH --job-name=rlab-d20-pi
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --time=12:00:00
#SBATCH --partition=gpu
#SBATCH --account=lab
#SBATCH --exclusive
#SBATCH --output=/res/runs/d20-pi/train.log
#SBATCH --open-mode=append

set -euo pipefail
cd /work/rlab
source .venv/bin/activate
export NCCL_DEBUG=INFO
export PYTHONUNBUFFERED=1
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun --kill-on-bad-exit=1 torchrun \\
  --nnodes="$SLURM_NNODES" \\
  --nproc-per-node=8 \\
  --rdzv-backend=c10d \\
  --rdzv-endpoint="$head_node:29501" \\
  --rdzv-id="$SLURM_JOB_ID" \\
  --max-restarts=1 \\
  -m rlab.core.train /res/runs/d20-pi/run.json
"""


def test_sbatch_script_multi_node_gpu():
    launch = LaunchSpec(
        launcher="slurm",
        nproc_per_node=8,
        nnodes=2,
        max_restarts=1,
        env={"NCCL_DEBUG": "INFO"},
        slurm=SlurmSpec(
            partition="gpu",
            account="lab",
            time="12:00:00",
            cpus_per_task=64,
            gpus_per_node=8,
            extra_args=("--exclusive",),
            setup=("source .venv/bin/activate",),
        ),
    )
    text = sbatch_script(
        tag="d20-pi",
        config_path=Path("/res/runs/d20-pi/run.json"),
        log_path=Path("/res/runs/d20-pi/train.log"),
        launch=launch,
        index=1,
        workdir=Path("/work/rlab"),
    )
    assert text == EXPECTED_D20


def test_sbatch_script_cpu_defaults():
    text = sbatch_script(
        tag="smoke-yarn",
        config_path=Path("/r/run.json"),
        log_path=Path("/r/train.log"),
        launch=LaunchSpec(launcher="slurm", nproc_per_node=2),
        torchrun="/venv/bin/torchrun",
    )
    lines = text.splitlines()
    assert "#SBATCH --nodes=1" in lines and not any("gpus" in line for line in lines)
    assert not any(line.startswith(("#SBATCH --partition", "#SBATCH --mem", "cd ")) for line in lines)
    assert "srun --kill-on-bad-exit=1 /venv/bin/torchrun \\" in lines
    assert '  --rdzv-endpoint="$head_node:29500" \\' in lines


@pytest.mark.slow
def test_real_submission_on_a_single_node_cluster(tiny_base_dir, tmp_path):
    """`rlab continue --launcher slurm` on a throw-away slurmctld + slurmd (+ munged) on 127.0.0.1."""

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    base_dir, results = pretrained_smoke_base(tiny_base_dir, tmp_path)
    with SlurmCluster(tmp_path / "slurm") as env:
        result = run_process(
            "continue",
            *spec_args(EXPERIMENTS / "smoke.yaml", base_dir, results),
            "--variants",
            "pi",
            "--nproc",
            "1",
            "--launcher",
            "slurm",
            env=env,
        )
        assert result.code == 0, result.out + result.err
        match = re.search(r"smoke-pi: submitted SLURM job (\d+)", result.out)
        assert match, result.out
        state = wait_for_job(match.group(1), env, timeout=240)
    layout = ExperimentLayout(results, "smoke")
    log = layout.train_log("smoke-pi").read_text() if layout.train_log("smoke-pi").exists() else "(no log)"
    assert state == "COMPLETED", log
    assert checkpoint_steps(BaseLayout(base_dir).checkpoint_dir("smoke-pi")) == [4, 6]
    assert json.loads(layout.metrics_file("smoke-pi").read_text().splitlines()[-1])["type"] == "done"
