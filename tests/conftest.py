"""Shared fixtures: tiny configs and hygiene that every test gets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
EVAL_BUNDLE_DIR = SHARED_DIR / "eval_bundle"

# Keep tests from touching a user's real nanochat dir or results.
os.environ.setdefault("WANDB_MODE", "disabled")


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch, tmp_path):
    """Each test gets its own base dir and results root, and no debug tracebacks."""
    monkeypatch.setenv("RLAB_BASE_DIR", str(tmp_path / "base"))
    monkeypatch.setenv("RLAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.delenv("NANOCHAT_BASE_DIR", raising=False)
    monkeypatch.delenv("RLAB_DEBUG", raising=False)


@pytest.fixture(autouse=True)
def _restore_torch_state():
    """Restore the default dtype and tear down any process group a test left behind."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        yield
        return
    dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(dtype)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
