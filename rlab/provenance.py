"""Which code produced a result: the git commit of rlab's checkout plus a dirty flag, else the package version.

Recorded in every checkpoint meta (training) and every eval.json section, and carried into results.csv,
so that the report can refuse to compare numbers produced by different code.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path

from rlab import __version__
from rlab.records.provenance import CodeVersion

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
