"""The experiment spec: the YAML a user writes (`experiments/*.yaml`), one model per concern.

An experiment takes one base checkpoint (`base`), clones it once per RoPE variant
(`variants`), continues each clone with the same `train` settings under torchrun
(`launch`), evaluates every clone the same way (`eval`) and logs to `tracking`. An optional
`pretrain` section trains the base model itself from scratch (the demo does this).

Every field is documented once, as an attribute docstring; `rlab schema` turns them into a
JSON Schema and `experiments/smoke.yaml` repeats them as comments. Flags given on the
command line override fields (see `rlab.spec.loading.load_spec`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator, model_validator

from rlab.paths import name_problem
from rlab.spec.base import StrictModel
from rlab.spec.bounds import (
    MAX_FACTOR,
    MAX_NODES,
    MAX_PROCS_PER_NODE,
    MAX_RESTARTS,
    MAX_VARIANTS,
    InRange,
    Length,
    StepCount,
)
from rlab.spec.eval import EvalSpec
from rlab.spec.rope import RopeSpec, default_variant_specs
from rlab.spec.tracking import TrackingSpec
from rlab.spec.train import ModelSpec, TrainSpec


def _check_name(kind: str, value: str) -> str:
    problem = name_problem(kind, value)
    if problem is not None:
        if kind in ("name", "tag") and problem.startswith(f"{kind} must"):  # the YAML path already says which
            problem = problem.removeprefix(f"{kind} ")
        raise ValueError(problem)
    return value


class BaseSpec(StrictModel):
    """The base checkpoint every variant starts from (nanochat's layout under `base_dir`)."""

    base_dir: Path | None = None
    """nanochat base dir (base_data/, tokenizer/, base_checkpoints/); null = --base-dir, then $RLAB_BASE_DIR,
    then $NANOCHAT_BASE_DIR, then ~/.cache/nanochat."""
    tag: str = "d20"
    """Base model tag: checkpoints live in <base_dir>/base_checkpoints/<tag>/."""
    step: StepCount | None = None
    """Checkpoint step to start from (--from-step); required by `rlab continue`."""

    @field_validator("tag")
    @classmethod
    def _tag_name(cls, value: str) -> str:
        return _check_name("tag", value)


class SlurmSpec(StrictModel):
    """sbatch settings for `launcher: slurm` (one job per variant; torchrun inside srun)."""

    partition: str | None = None
    """--partition; null = the cluster's default."""
    account: str | None = None
    """--account; null = none."""
    qos: str | None = None
    """--qos; null = none."""
    time: str = "24:00:00"
    """--time limit (HH:MM:SS or D-HH:MM:SS)."""
    cpus_per_task: PositiveInt | None = None
    """--cpus-per-task for the single torchrun task per node; null = the cluster's default."""
    mem: str | None = None
    """--mem per node (e.g. 200G); null = the cluster's default."""
    gpus_per_node: NonNegativeInt | None = None
    """--gpus-per-node; null = request no GPUs (a CPU cluster). Set it to nproc_per_node on a GPU cluster."""
    extra_args: tuple[str, ...] = ()
    """More `#SBATCH` lines, each given without the prefix (e.g. "--exclusive")."""
    setup: tuple[str, ...] = ()
    """Shell lines run before torchrun (e.g. "module load cuda", "source .venv/bin/activate")."""


class LaunchSpec(StrictModel):
    """How each job is launched: torchrun on this machine, several machines, or SLURM."""

    launcher: Literal["local", "slurm"] = "local"
    """local: run torchrun here; slurm: write an sbatch script per variant and submit it."""
    nproc_per_node: Annotated[int, InRange(1, MAX_PROCS_PER_NODE)] | None = None
    """Processes (GPUs, or CPU processes with gloo) per node for each job; null = every visible GPU, or 1 on CPU."""
    nnodes: Annotated[int, InRange(1, MAX_NODES)] = 1
    """Nodes per job; > 1 needs rdzv_endpoint (or the SLURM launcher, which fills it in)."""
    node_rank: Annotated[int, InRange(0, MAX_NODES - 1)] = 0
    """This machine's rank among the nodes (multi-node local launches; run the same command on each node)."""
    rdzv_endpoint: str | None = None
    """Rendezvous host[:port] shared by all nodes; null = single node, torchrun --standalone (it picks a free
    port itself, so concurrent jobs never collide)."""
    rdzv_port: int = Field(29500, ge=1024, le=65000)
    """Multi-node rendezvous port when rdzv_endpoint names none; the i-th variant uses rdzv_port + i."""
    gpus_per_variant: Annotated[int, InRange(1, MAX_PROCS_PER_NODE)] | None = None
    """GPUs per job; null = all nproc_per_node (jobs run one after another). Fewer than the GPUs available runs
    variants concurrently on disjoint CUDA_VISIBLE_DEVICES sets."""
    max_restarts: Annotated[int, InRange(0, MAX_RESTARTS)] = 0
    """torchrun --max-restarts: restarts of a failed job's workers before it counts as failed."""
    env: dict[str, str] = {}
    """Environment variables added to every job (e.g. NCCL_DEBUG: INFO)."""
    torchrun: str = "torchrun"
    """torchrun program; the plain name is looked up next to the running Python first, then on PATH."""
    slurm: SlurmSpec = SlurmSpec()
    """sbatch settings, used when launcher is slurm."""
    gpu_memory_gib: PositiveFloat | None = None
    """Memory of one GPU in GiB, for the memory plan's fit check of a GPU launch; null = this machine's first
    CUDA device's, else 80 (an H100's)."""

    @field_validator("rdzv_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        host, sep, port = value.rpartition(":")
        if not sep:
            host, port = value, ""
        if not host.strip() or any(c.isspace() for c in value):
            raise ValueError(f"must be host[:port] (got {value!r})")
        if sep and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"port must be a number from 1 to 65535 (got {port!r} in {value!r})")
        return value

    @model_validator(mode="after")
    def _check(self) -> LaunchSpec:
        if self.node_rank >= self.nnodes:
            raise ValueError(f"node_rank: must be < nnodes (got {self.node_rank} with nnodes={self.nnodes})")
        if self.nnodes > 1 and self.launcher == "local" and not self.rdzv_endpoint:
            raise ValueError(
                f"rdzv_endpoint: required when nnodes > 1 (got nnodes={self.nnodes}); "
                "set it to the first node's host[:port]"
            )
        if (
            self.gpus_per_variant is not None
            and self.nproc_per_node is not None
            and self.gpus_per_variant > self.nproc_per_node
        ):
            raise ValueError(
                f"gpus_per_variant: must be <= nproc_per_node (got {self.gpus_per_variant} > "
                f"{self.nproc_per_node})"
            )
        return self

    @property
    def procs_per_job(self) -> int:
        """Worker processes per node of one job."""
        return self.gpus_per_variant or self.nproc_per_node or 1

    @property
    def world_size(self) -> int:
        """Ranks of one job across all its nodes."""
        return self.procs_per_job * self.nnodes


class PretrainSpec(StrictModel):
    """Train the base model from scratch into base.tag (plain RoPE); `rlab pretrain` runs it."""

    model: ModelSpec = ModelSpec()
    """Architecture of the base model (vocab size comes from the tokenizer)."""
    train: TrainSpec = TrainSpec()
    """Training settings of the from-scratch run (seq_len is the base's context length L0)."""


ZERO_SHOT_SUFFIX = "-zeroshot"
"""What a variant's training-free arm adds to its tag (`<tag>-zeroshot`); no variant name may end with it."""

REPLICATE_SUFFIX = re.compile(r"-seed[0-9]+$")
"""What seed replicate i >= 1 adds to its tag (`<tag>-seed<i>`, `<base>-seed<i>`): the one pattern that plans
tags and reads them back; no variant name may be `seed<i>` or end with `-seed<i>` (its tag would read as a
replicate)."""


class ExperimentSpec(StrictModel):
    """One context-extension experiment: a base checkpoint, its RoPE variants, and how to train/eval/launch them."""

    name: str | None = None
    """Experiment name: results go to <results_dir>/<name>/; null = the base tag."""
    results_dir: Path | None = None
    """Results root; null = $RLAB_RESULTS_DIR, then ./results."""
    base: BaseSpec = BaseSpec()
    """The base checkpoint every variant starts from."""
    target_len: Length | None = None
    """Target context length of the extension; null = 4 x the base checkpoint's sequence_len (its meta).
    train.seq_len defaults to it, and each variant's factor defaults to target_len / L0."""
    scale: Annotated[float, InRange(1.0, MAX_FACTOR)] | None = None
    """Scale factor for built-in variants named with --variants that the spec does not define;
    null = target_len / L0 (from the base checkpoint)."""
    variants: dict[str, RopeSpec] = Field({}, max_length=MAX_VARIANTS)
    """Variant name -> RoPE config. Each runs as tag <base.tag>-<name>. --variants selects among these and the
    built-ins (rope, pi, ntk, dynamic-ntk, yarn, llama3, ntk-by-parts at `scale`; abf and longrope need
    parameters of their own, so only a spec defines them)."""
    train: TrainSpec = TrainSpec()
    """Continued-pretraining settings for every variant (seq_len is the new, longer context)."""
    eval: EvalSpec = EvalSpec()
    """Evaluation settings shared by every tag (`rlab eval`)."""
    launch: LaunchSpec = LaunchSpec()
    """How jobs are launched (torchrun, nodes, GPUs, SLURM)."""
    tracking: TrackingSpec = TrackingSpec()
    """wandb logging."""
    pretrain: PretrainSpec | None = None
    """Optional from-scratch training of the base model (the demo's); null = the base checkpoint already exists."""

    @field_validator("name")
    @classmethod
    def _experiment_name(cls, value: str | None) -> str | None:
        return None if value is None else _check_name("name", value)

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, value: dict[str, RopeSpec]) -> dict[str, RopeSpec]:
        for name in value:
            _check_name("variant name", name)
            if REPLICATE_SUFFIX.search(f"-{name}") or name.endswith(ZERO_SHOT_SUFFIX):
                raise ValueError(
                    f"variant name {name!r} is reserved: replicates are tagged -seed<i> and training-free arms "
                    "-zeroshot; pick another name"
                )
        return value

    @property
    def experiment(self) -> str:
        """The experiment's name (the base tag when none is given)."""
        return self.name or self.base.tag

    @property
    def base_step(self) -> int | None:
        """The step variants start from: base.step, or the last step of the pretrain run."""
        if self.base.step is not None:
            return self.base.step
        return self.pretrain.train.steps if self.pretrain is not None else None

    def tag_for(self, variant: str) -> str:
        """Tag of a variant's clone: ``<base>-<variant>`` for the base's default experiment (no `name`, or
        the base tag as name), ``<base>-<name>-<variant>`` for a named one, so two experiments on one base
        never share (evaluate, resume or overwrite) each other's checkpoints."""
        if self.experiment == self.base.tag:
            return f"{self.base.tag}-{variant}"
        return f"{self.base.tag}-{self.experiment}-{variant}"

    @property
    def tag_prefix(self) -> str:
        """What every variant tag of this experiment starts with (``d20-`` or ``d20-<name>-``)."""
        return self.tag_for("")

    def builtin_variants(self) -> dict[str, RopeSpec]:
        """The built-in variants at this spec's `scale`; with no scale their factor is left unset
        (the plan fills in target_len / L0)."""
        if self.scale is not None:
            return default_variant_specs(self.scale)
        return {name: RopeSpec(variant=spec.variant) for name, spec in default_variant_specs().items()}
