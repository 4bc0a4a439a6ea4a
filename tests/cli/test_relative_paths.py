"""Paths typed relative to one directory are stored absolute, so every command rlab prints works from any other."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from tests.cli.test_continue_cli import fake_torchrun
from tests.orchestrate.helpers import make_checkpoint


def _rlab(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RLAB_BASE_DIR", "RLAB_RESULTS_DIR")}
    env["COLUMNS"] = "400"
    return subprocess.run(
        [sys.executable, "-m", "rlab", *argv], capture_output=True, text=True, cwd=cwd, env=env
    )


def _printed(text: str, start: str) -> list[str]:
    """The printed command starting with `start` (rich may soft-wrap nothing at 400 columns)."""
    line = next(line.strip() for line in text.splitlines() if line.strip().startswith(start))
    return shlex.split(line)


def test_printed_commands_work_from_another_directory(tmp_path):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    make_checkpoint(here / "base", "d20", steps=(20,))
    (here / "spec.yaml").write_text(
        f"name: rel\nlaunch: {{torchrun: {fake_torchrun(tmp_path, fail_on='d20-rel-ntk')}}}\n"
    )
    common = ["--spec", "spec.yaml", "--base-dir", "base", "--results-dir", "res", "--from-step", "20"]
    failed = _rlab(["continue", *common, "--variants", "pi,ntk"], cwd=here)
    assert failed.returncode == 1, failed.stderr
    saved = yaml.safe_load((here / "res" / "rel" / "spec.resolved.yaml").read_text())
    assert saved["base"]["base_dir"] == str(here / "base") and saved["results_dir"] == str(here / "res")
    own = yaml.safe_load((here / "res" / "rel" / "runs" / "d20-rel-ntk" / "spec.resolved.yaml").read_text())
    assert own["base"]["base_dir"] == str(here / "base")
    rerun = _printed(failed.stderr, "rlab continue")
    assert Path(rerun[rerun.index("--spec") + 1]).is_absolute()
    again = _rlab(rerun[1:], cwd=elsewhere)  # the stand-in fails on ntk again, as a resumed run
    assert again.returncode == 1 and "d20-rel-ntk: resuming" in again.stdout, again.stderr
    done = _rlab(["continue", *common, "--variants", "pi", "--resume"], cwd=here)
    assert done.returncode == 0, done.stderr
    next_eval = _printed(done.stdout, "next: rlab eval")[1:]
    listed = _rlab([*next_eval[1:], "--dry-run", "--no-core"], cwd=elsewhere)
    assert listed.returncode == 0, listed.stderr
    assert f"{here / 'base'}" in listed.stdout and "d20-rel-pi" in listed.stdout
