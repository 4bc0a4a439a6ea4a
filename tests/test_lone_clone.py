"""The repository alone passes its data-dependent tests: a copy of it with nothing beside it (no ../shared)
and no test-data variables set runs the CORE tests on the vendored bundle, and the tests that need
nanochat-written checkpoints or the whole bundle skip, saying which variable to set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import partial

import pytest

from tests.conftest import FULL_EVAL_BUNDLE_ENV, NANOCHAT_REFERENCE_ENV, NANOCHAT_REFERENCE_SKIP, REPO_ROOT

# Tests that read test data (the CORE bundle, nanochat's checkpoints): a few seconds to a minute each file.
DATA_TESTS = (
    "tests/evals/test_core_bundle.py",
    "tests/evals/test_bundle_cli.py",
    "tests/cli/test_core_tasks_cli.py",
    "tests/orchestrate/test_base_info.py",
    "tests/nanochat/test_model_parity.py",
    "tests/nanochat/test_optim_import_2025.py",
    "tests/core/test_checkpoint_meta.py",
    "tests/cli/test_reference_default_evals.py",
)


def _copy_checkout(dest) -> None:
    """The files git would put in a clone of this working tree (tracked and new, not ignored), as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        src = REPO_ROOT / name
        if src.is_file():  # deleted in the working tree but still in the index: not part of the copy
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


@pytest.mark.slow
def test_a_lone_copy_of_the_repository_passes_its_data_tests(tmp_path):
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs a git checkout (the copy is what `git ls-files` lists)")
    clone = tmp_path / "rlab"
    _copy_checkout(clone)
    assert not (clone.parent / "shared").exists()
    env = {k: v for k, v in os.environ.items() if k not in (FULL_EVAL_BUNDLE_ENV, NANOCHAT_REFERENCE_ENV)}
    env["PYTHONPATH"] = str(clone)  # the copy's rlab, not the one installed from this checkout
    env["COLUMNS"] = "200"  # skip reasons on one line each
    in_clone = partial(subprocess.run, cwd=clone, env=env, capture_output=True, text=True)
    where = in_clone([sys.executable, "-c", "import rlab; print(rlab.__file__)"])
    assert where.stdout.startswith(str(clone)), where.stdout + where.stderr

    pytest_argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow and not gpu", *DATA_TESTS]
    run = in_clone([sys.executable, *pytest_argv], timeout=1200)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    assert " passed" in out, out[-6000:]
    assert NANOCHAT_REFERENCE_SKIP in " ".join(out.split()), out[-6000:]  # skipped, saying what to set
