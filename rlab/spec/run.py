"""Resolved per-tag configs: what a torchrun worker reads from one JSON file.

The orchestrator writes them (`runs/<tag>/run.json`, `evals/<tag>/eval_run.json`); the workers
(`python -m rlab.core.train FILE`, `python -m rlab.evals FILE`) read them and declare no flags of
their own, so there is no second list of options to keep in sync.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError

from rlab.atomic_io import write_text_atomic
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


class DataStart(StrictModel):
    """Where a continued run starts reading train data: the base checkpoint's recorded loader position.

    Every variant of an experiment gets the same start, so they all continue on data the base has
    not seen. Exactly one of the two forms is set, depending on who wrote the base checkpoint.
    """

    source: Literal["nanochat", "rlab"]
    """Who recorded the position: nanochat's `dataloader_state_dict` or rlab's own `loader_state`."""
    tag: str
    """The base tag whose meta recorded it."""
    step: int = Field(ge=0)
    """The base step whose meta recorded it."""
    pq_idx: int | None = Field(None, ge=0)
    """nanochat: index of the parquet shard the base would read next."""
    rg_idx: int | None = Field(None, ge=0)
    """nanochat: row group within that shard."""
    epoch: int | None = Field(None, ge=0)
    """nanochat (newer versions): pass over the data."""
    loader_state: dict[str, Any] | None = None
    """rlab: the base's `loader_state` meta entry as written ({world_size, ranks: [...]})."""

    def describe(self) -> str:
        """Short label for plans and logs, e.g. ``after d20@21400 (pq 3, rg 17)``."""
        if self.source == "nanochat":
            where = f"pq {self.pq_idx}, rg {self.rg_idx}" + (
                f", epoch {self.epoch}" if self.epoch is not None else ""
            )
        else:
            ranks = (self.loader_state or {}).get("ranks") or [{}]
            first = ranks[0] if isinstance(ranks[0], dict) else {}
            where = f"epoch {first.get('epoch', 0)}, slot {first.get('slot', 0)}, doc {first.get('doc', 0)}"
        return f"after {self.tag}@{self.step} ({where})"


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
    data_start: DataStart | None = None
    """Where the train loader starts (a fresh run from `init`); null = the beginning of the data."""


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


ConfigT = TypeVar("ConfigT", RunConfig, EvalRunConfig)


def write_config(config: RunConfig | EvalRunConfig, path: Path) -> None:
    """Write a resolved config as JSON, atomically."""

    write_text_atomic(path, config.model_dump_json(indent=2) + "\n")


def read_config(path: Path, cls: type[ConfigT]) -> ConfigT:
    """Read and validate a resolved config; a bad file is a `SpecError` naming the path."""
    try:
        data = json.loads(Path(path).read_text())
        return cls.model_validate(data)
    except FileNotFoundError:
        raise SpecError(f"Run config not found: {path}") from None
    except (json.JSONDecodeError, ValidationError) as exc:
        raise SpecError(f"{path}: invalid run config:\n{exc}") from None
