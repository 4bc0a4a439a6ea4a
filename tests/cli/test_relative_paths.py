"""Paths typed relative to one directory are stored absolute, so every command rlab prints works from any other."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from tests.cli.harness import Outcome, run_main
from tests.orchestrate.helpers import fake_torchrun, make_checkpoint, spec_args


def _rlab(argv: list[str], cwd: Path) -> Outcome:
    """`rlab ARGV` run from `cwd`, with no base or results dir from the environment."""
    return run_main(*argv, cwd=cwd, columns=400, env={"RLAB_BASE_DIR": None, "RLAB_RESULTS_DIR": None})


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
    common = [*spec_args("spec.yaml", "base", "res"), "--from-step", "20"]
    failed = _rlab(["continue", *common, "--variants", "pi,ntk"], cwd=here)
    assert failed.code == 1, failed.err
    saved = yaml.safe_load((here / "res" / "rel" / "spec.resolved.yaml").read_text())
    assert saved["base"]["base_dir"] == str(here / "base") and saved["results_dir"] == str(here / "res")
    own = yaml.safe_load((here / "res" / "rel" / "runs" / "d20-rel-ntk" / "spec.resolved.yaml").read_text())
    assert own["base"]["base_dir"] == str(here / "base")
    rerun = _printed(failed.err, "rlab continue")
    assert Path(rerun[rerun.index("--spec") + 1]).is_absolute()
    again = _rlab(rerun[1:], cwd=elsewhere)  # the stand-in fails on ntk again, as a resumed run
    assert again.code == 1 and "d20-rel-ntk: resuming" in again.out, again.err
    done = _rlab(["continue", *common, "--variants", "pi", "--resume"], cwd=here)
    assert done.code == 0, done.err
    next_eval = _printed(done.out, "next: rlab eval")[1:]
    listed = _rlab([*next_eval[1:], "--dry-run", "--no-core"], cwd=elsewhere)
    assert listed.code == 0, listed.err
    assert f"{here / 'base'}" in listed.out and "d20-rel-pi" in listed.out
