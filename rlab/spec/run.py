"""Resolved per-tag configs: what a torchrun worker reads from one JSON file.

The orchestrator writes them (`runs/<tag>/run.json`, `evals/<tag>/eval_run.json`); the workers
(`python -m rlab.core.train FILE`, `python -m rlab.evals FILE`) read them and declare no flags of
their own, so there is no second list of options to keep in sync.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from rlab.errors import SpecError
from rlab.spec.base import StrictModel
from rlab.spec.eval import EvalSpec
from rlab.spec.rope import RopeSpec
from rlab.spec.tracking import TrackingSpec
from rlab.spec.train import ModelSpec, TrainSpec


class ScratchInit(StrictModel):
    """Start from freshly initialised weights (the demo's base model)."""

    kind: Literal["scratch"] = "scratch"
    model: ModelSpec = ModelSpec()


class CheckpointInit(StrictModel):
    """Start from the weights of `tag` at `step` under the run's checkpoints root."""

    kind: Literal["checkpoint"] = "checkpoint"
    tag: str
    step: int = Field(ge=0)


class Lineage(StrictModel):
    """Where a tag's weights came from; stamped into every checkpoint meta it writes."""

    parent_tag: str
    parent_step: int


class RunConfig(StrictModel):
    """Everything one training job needs. Written to `runs/<tag>/run.json`."""

    experiment: str
    tag: str
    """Target tag: checkpoints go to <base_dir>/base_checkpoints/<tag>/."""
    variant: str
    """Variant name (the key in the experiment's variants)."""
    base_dir: Path
    """nanochat base dir (base_data/, tokenizer/, base_checkpoints/)."""
    run_dir: Path
    """Where metrics.jsonl and logs go."""
    init: Annotated[ScratchInit | CheckpointInit, Field(discriminator="kind")]
    lineage: Lineage | None = None
    rope: RopeSpec = RopeSpec()
    train: TrainSpec = TrainSpec()
    tracking: TrackingSpec = TrackingSpec()
    resume: bool = False
    """Continue from the newest complete checkpoint of `tag` instead of `init`."""


class EvalRunConfig(StrictModel):
    """Everything one eval job needs. Written to `evals/<tag>/eval_run.json`."""

    experiment: str
    tag: str
    variant: str
    base_dir: Path
    step: int | None = None
    """Checkpoint step; null = the newest complete one."""
    out_dir: Path
    """Per-tag outputs (see rlab.evals.outputs): eval.json and its CSVs."""
    core_csv: Path
    """Per-task CORE CSV of this variant (results/<exp>/results_<variant>.csv)."""
    eval: EvalSpec = EvalSpec()
    force: bool = False
    """Drop sections of an existing eval.json that describe another checkpoint and are not re-run
    (without it the worker refuses rather than lose them)."""


def write_config(config: RunConfig | EvalRunConfig, path: Path) -> None:
    """Write a resolved config as JSON, atomically."""
    from rlab.atomic_io import write_text_atomic

    write_text_atomic(path, config.model_dump_json(indent=2) + "\n")


def read_config(path: Path, cls: type[RunConfig] | type[EvalRunConfig]):
    """Read and validate a resolved config; a bad file is a `SpecError` naming the path."""
    try:
        data = json.loads(Path(path).read_text())
        return cls.model_validate(data)
    except FileNotFoundError:
        raise SpecError(f"Run config not found: {path}") from None
    except (json.JSONDecodeError, ValidationError) as exc:
        raise SpecError(f"{path}: invalid run config:\n{exc}") from None
