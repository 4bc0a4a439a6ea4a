"""Fixtures for the report tests: a copy of the hand-written experiment `fx` in a temp results root.

`fixtures/fx` holds the files the evals and the trainer write (docs/architecture.md formats):
tags fx-rope (baseline), fx-pi (partial CORE), fx-yarn (its results_yarn.csv is missing) are
evaluated; fx-ntk only has a metrics.jsonl with a torn last line (still training, not evaluated).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlab.paths import ExperimentLayout
from rlab.spec.run import CheckpointInit, Lineage, RunConfig, ScratchInit, write_config
from rlab.spec.train import TrainSpec

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def results_root(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(FIXTURES / "fx", root / "fx")
    return root


@pytest.fixture
def fx(results_root: Path) -> ExperimentLayout:
    return ExperimentLayout(results_root, "fx")


def run_config(
    tag: str,
    variant: str,
    *,
    seed: int = 42,
    steps: int = 5,
    scratch: bool = False,
    parent: str | None = None,
) -> RunConfig:
    """A run.json record as `rlab continue` (or `rlab pretrain`, `scratch`) writes it: experiment fx, continuing
    `parent` (None: no lineage) at step 4."""
    init = ScratchInit() if scratch else CheckpointInit(tag=parent or "fx", step=4)
    return RunConfig(
        experiment="fx",
        tag=tag,
        variant=variant,
        base_dir=Path("base"),
        run_dir=Path("runs") / tag,
        init=init,
        lineage=Lineage(parent_tag=parent, parent_step=4) if parent is not None else None,
        train=TrainSpec(seed=seed, steps=steps),
    )


def write_run(layout: ExperimentLayout, tag: str, variant: str, **fields) -> None:
    """runs/<tag>/run.json through its model (`run_config`'s fields)."""
    layout.run_dir(tag).mkdir(parents=True, exist_ok=True)
    write_config(run_config(tag, variant, **fields), layout.run_config(tag))
