"""`make gpu-check` as far as a CPU machine can take it: the commands it would run, and the GPU bench's
answer where there is no CUDA."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO_ROOT


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_gpu_check_installs_the_cuda_build_into_its_own_venv_then_runs_gpu_tests_and_bench():
    out = subprocess.run(
        ["make", "-n", "gpu-check"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "VENV=.venv-gpu" in out and "download.pytorch.org/whl/cu128" in out and "torch==2.9.1" in out
    assert ".venv-gpu/bin/python -m pytest -m gpu" in out
    assert ".venv-gpu/bin/python -m bench gpu" in out
    assert (
        ".venv-gpu/bin/python -m pip install -q psutil" in out
    )  # nanochat's base_train (the anchor) needs it
    assert "sys.exit(0 if ok else" in out  # stops with a clear line when no GPU is visible


def test_gpu_bench_says_so_without_cuda():

    if torch.cuda.is_available():
        pytest.skip("CUDA present: the bench would run for real")
    out = subprocess.run(
        [sys.executable, "-m", "bench", "gpu"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "no CUDA device: the GPU benchmark did not run" in out
