"""Fixtures for the training tests: a writable base dir over the shared tiny corpus, run configs."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def train_base(tiny_base_dir: Path, tmp_path: Path) -> Path:
    """A base dir whose data and tokenizer are the shared (read-only) tiny ones, with its own checkpoints."""
    base = tmp_path / "train_base"
    base.mkdir()
    for name in ("base_data", "tokenizer"):
        (base / name).symlink_to(tiny_base_dir / name, target_is_directory=True)
    return base


@pytest.fixture(autouse=True)
def _one_thread():
    """Two cores are shared by everyone: keep torch to one intra-op thread in these tests."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
