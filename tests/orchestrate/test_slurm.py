"""SLURM: exact sbatch script generation; a real single-node cluster as a slow test."""

from __future__ import annotations

from pathlib import Path

from rlab.orchestrate.slurm import sbatch_script
from rlab.spec.experiment import LaunchSpec, SlurmSpec

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
        launcher="slurm", nproc_per_node=8, nnodes=2, max_restarts=1, env={"NCCL_DEBUG": "INFO"},
        slurm=SlurmSpec(partition="gpu", account="lab", time="12:00:00", cpus_per_task=64, gpus_per_node=8,
                        extra_args=("--exclusive",), setup=("source .venv/bin/activate",)),
    )
    text = sbatch_script(tag="d20-pi", config_path=Path("/res/runs/d20-pi/run.json"),
                         log_path=Path("/res/runs/d20-pi/train.log"), launch=launch, index=1,
                         workdir=Path("/work/rlab"))
    assert text == EXPECTED_D20


def test_sbatch_script_cpu_defaults():
    text = sbatch_script(tag="smoke-yarn", config_path=Path("/r/run.json"), log_path=Path("/r/train.log"),
                         launch=LaunchSpec(launcher="slurm", nproc_per_node=2), torchrun="/venv/bin/torchrun")
    lines = text.splitlines()
    assert "#SBATCH --nodes=1" in lines and not any("gpus" in line for line in lines)
    assert not any(line.startswith(("#SBATCH --partition", "#SBATCH --mem", "cd ")) for line in lines)
    assert "srun --kill-on-bad-exit=1 /venv/bin/torchrun \\" in lines
    assert '  --rdzv-endpoint="$head_node:29500" \\' in lines
