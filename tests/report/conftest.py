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

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def results_root(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(FIXTURES / "fx", root / "fx")
    return root


@pytest.fixture
def fx(results_root: Path) -> ExperimentLayout:
    return ExperimentLayout(results_root, "fx")
