"""Shared Typer option aliases, so every command spells a flag the same way with the same help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

SpecOpt = Annotated[
    Optional[Path],
    typer.Option("--spec", "-s", help="Experiment spec (experiments/NAME.yaml). Flags override its fields.",
                 dir_okay=False),
]
BaseDirOpt = Annotated[
    Optional[Path],
    typer.Option("--base-dir", help="nanochat base dir; default $RLAB_BASE_DIR, $NANOCHAT_BASE_DIR, ~/.cache/nanochat.",
                 file_okay=False),
]
BaseTagOpt = Annotated[Optional[str], typer.Option("--base-tag", help="Base model tag (spec: base.tag; default d20).")]
ResultsDirOpt = Annotated[
    Optional[Path],
    typer.Option("--results-dir", help="Results root; default $RLAB_RESULTS_DIR, then ./results.", file_okay=False),
]
ExperimentOpt = Annotated[
    Optional[str], typer.Option("--experiment", "-e", help="Experiment name (spec: name; default the base tag).")
]
NprocOpt = Annotated[
    Optional[int], typer.Option("--nproc", min=1, help="Processes (GPUs, or CPU processes) per node per job.")
]
StepsOpt = Annotated[Optional[int], typer.Option(
    "--steps", min=0, help="Optimizer steps to run (spec: train.steps); 0 = training-free arms only.")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print the plan and the exact commands; touch nothing.")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace existing tags (says what it deletes first).")]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue existing tags from their newest checkpoint.")]
LauncherOpt = Annotated[
    Optional[str],
    typer.Option("--launcher", help="local (torchrun here) or slurm (sbatch per variant). Spec: launch.launcher."),
]
MaxRestartsOpt = Annotated[
    Optional[int], typer.Option("--max-restarts", min=0, help="torchrun --max-restarts (spec: launch.max_restarts).")
]
NnodesOpt = Annotated[Optional[int], typer.Option("--nnodes", min=1, help="Nodes per job (spec: launch.nnodes).")]
NodeRankOpt = Annotated[
    Optional[int], typer.Option("--node-rank", min=0, help="This node's rank; run the same command on every node.")
]
RdzvEndpointOpt = Annotated[
    Optional[str], typer.Option("--rdzv-endpoint", help="Rendezvous host[:port] of the first node (multi-node).")
]
GpusPerVariantOpt = Annotated[
    Optional[int],
    typer.Option("--gpus-per-variant", min=1, help="GPUs per job; fewer than visible runs variants concurrently."),
]
