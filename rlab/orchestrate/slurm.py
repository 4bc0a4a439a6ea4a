"""SLURM: one sbatch script per variant, torchrun inside srun (one task per node), and submission.

The script asks for `launch.nnodes` nodes with one task each; srun starts one torchrun per
node, and the nodes meet at a c10d rendezvous on the job's first node (port rdzv_port + the
variant's index, so two variants sharing a node never collide). The job's output goes to the
variant's train.log, like a local launch.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from rlab.errors import LaunchError
from rlab.orchestrate.launch import TRAIN_MODULE
from rlab.spec.experiment import LaunchSpec

log = logging.getLogger(__name__)


def sbatch_script(
    *,
    tag: str,
    config_path: Path,
    log_path: Path,
    launch: LaunchSpec,
    index: int = 0,
    torchrun: str | None = None,
    workdir: Path | None = None,
    module: str = TRAIN_MODULE,
) -> str:
    """The sbatch script of one job (deterministic: tests compare it exactly)."""
    s = launch.slurm
    gpus = s.gpus_per_node if s.gpus_per_node is not None else 0
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=rlab-{tag}",
        f"#SBATCH --nodes={launch.nnodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if s.cpus_per_task is not None:
        lines.append(f"#SBATCH --cpus-per-task={s.cpus_per_task}")
    if s.mem is not None:
        lines.append(f"#SBATCH --mem={s.mem}")
    lines.append(f"#SBATCH --time={s.time}")
    for key, value in (("partition", s.partition), ("account", s.account), ("qos", s.qos)):
        if value is not None:
            lines.append(f"#SBATCH --{key}={value}")
    lines += [f"#SBATCH {arg}" for arg in s.extra_args]
    lines += [
        f"#SBATCH --output={log_path}",
        "#SBATCH --open-mode=append",
        "",
        "set -euo pipefail",
    ]
    if workdir is not None:
        lines.append(f"cd {shlex.quote(str(workdir))}")
    lines += list(s.setup)
    for key, value in launch.env.items():
        lines.append(f"export {key}={shlex.quote(value)}")
    lines += [
        "export PYTHONUNBUFFERED=1",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"srun --kill-on-bad-exit=1 {shlex.quote(torchrun or launch.torchrun)} \\",
        '  --nnodes="$SLURM_NNODES" \\',
        f"  --nproc-per-node={launch.procs_per_job} \\",
        "  --rdzv-backend=c10d \\",
        f'  --rdzv-endpoint="$head_node:{launch.rdzv_port + index}" \\',
        '  --rdzv-id="$SLURM_JOB_ID" \\',
        f"  --max-restarts={launch.max_restarts} \\",
        f"  -m {module} {shlex.quote(str(config_path))}",
        "",
    ]
    return "\n".join(lines)


def write_script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def submit(script: Path, *, sbatch: str = "sbatch", env: dict[str, str] | None = None) -> str:
    """Submit `script` with sbatch; returns the job id."""

    program = shutil.which(sbatch)
    if program is None:
        raise LaunchError(
            f"{sbatch} not found on PATH.", "Run on a SLURM login node, or use --launcher local."
        )
    result = subprocess.run(
        [program, "--parsable", str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=60,
    )
    if result.returncode != 0:
        raise LaunchError(f"sbatch failed for {script} (exit {result.returncode}): {result.stderr.strip()}")
    match = re.match(r"\s*(\d+)", result.stdout)
    if match is None:
        raise LaunchError(f"sbatch printed no job id for {script}: {result.stdout.strip()!r}")
    log.info("submitted %s as job %s", script, match.group(1))
    return match.group(1)
