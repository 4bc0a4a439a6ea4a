"""Which code produced a result (the git commit of rlab's checkout plus a dirty flag, else the package version),
and on which machine (`Platform`: CPU, ISA, torch, threads).

Recorded in every checkpoint meta (training) and every eval.json section. The code version is carried into
results.csv, so that the report can refuse to compare numbers produced by different code; the platform lets the
report and `rlab compare` say when numbers were computed under other numerics (`rlab.report.sources.numerics`).
"""

from __future__ import annotations

import functools
import hashlib
import platform as host
import subprocess
from pathlib import Path
from typing import Any

from rlab import __version__
from rlab.records.provenance import CodeVersion, Platform

REPO_ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, check=True, timeout=20).stdout


CODE_PATHS = ("--", ".", ":(exclude)results")
"""What counts as code: the checkout minus `results/`, which runs write into (the committed demo results
among them), so that a run's own outputs never change the code version of the evals that follow it."""


def _local_changes_hash() -> str:
    """Hash of `git diff HEAD` plus the names and contents of untracked, not ignored files (code paths only)."""
    digest = hashlib.sha256(_git("diff", "HEAD", "--binary", *CODE_PATHS))
    for name in sorted(
        _git("ls-files", "--others", "--exclude-standard", "-z", *CODE_PATHS).decode().split("\0")
    ):
        path = REPO_ROOT / name
        if name and path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def code_version() -> CodeVersion:
    """This process's code version (computed once): SHA, dirty flag and a hash of the local diff."""
    if not (REPO_ROOT / ".git").exists():  # an installed package, not a checkout
        return CodeVersion(package=__version__)
    try:
        sha = _git("rev-parse", "HEAD").decode().strip()
        dirty = bool(
            _git("status", "--porcelain", *CODE_PATHS).strip()
        )  # untracked (not ignored) files count
        diff_hash = _local_changes_hash() if dirty else None
    except (OSError, subprocess.SubprocessError):
        return CodeVersion(package=__version__)
    return CodeVersion(package=__version__, git_sha=sha or None, dirty=dirty, diff_hash=diff_hash)


NUMERIC_ISA = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_bf16",
    "amx_tile",
    "asimd",
    "sve",
    "bf16",
)
"""CPU flags that change which kernels torch and oneDNN run, so the digits of a result (x86 and Arm names)."""


def cpu_facts(cpuinfo: str) -> tuple[str | None, list[str]]:
    """(model name, the NUMERIC_ISA flags present) from /proc/cpuinfo's text (its first processor's lines)."""
    model: str | None = None
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and model is None:
            model = value.strip() or None
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, [f for f in NUMERIC_ISA if f in flags]


@functools.lru_cache(maxsize=1)
def _cpu() -> tuple[str, list[str]]:
    try:
        model, isa = cpu_facts(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        model, isa = None, []
    return model or host.processor() or host.machine() or "unknown", isa


def current_platform(device: Any = "cpu") -> Platform:
    """This process's platform, now (threads may be set after import): on `device` (a torch device or name)."""
    import torch

    device = torch.device(device)
    model, isa = _cpu()
    return Platform(
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else device.type,
        cpu=model,
        isa=isa,
        kernels=torch.backends.cpu.get_cpu_capability(),
        torch=torch.__version__,
        threads=torch.get_num_threads(),
    )
