"""The preflight opens what a run will read before anything is cloned or launched: a broken checkpoint,
tokenizer or shard is one or two lines naming the file, said before the clone and torchrun rather than
inside their output. A resumed tag whose newest checkpoint is broken gets a command that works."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import torch

from rlab.core.tokenizer import Tokenizer
from rlab.errors import EvalError
from rlab.evals.passkey.task import build_prompt, shortest_prompt
from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps, meta_file, model_file
from tests.cli.harness import Outcome, run_main
from tests.orchestrate.helpers import make_checkpoint, spec_args, write_spec


def assert_named_error(outcome: Outcome, *fragments: str) -> None:
    """Exit 1, no traceback, and an error of at most 3 lines (message naming the file, hint) after any warnings."""
    assert outcome.exception is None and outcome.code == 1 and "Traceback" not in outcome.text, outcome.text
    error = outcome.err[outcome.err.index("Error:") :]
    assert len(error.strip().splitlines()) <= 3, error
    for fragment in fragments:
        assert fragment in " ".join(error.split()), error


def _recording_torchrun(tmp_path: Path) -> Path:
    script = tmp_path / "torchrun-records"
    script.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "launched"}\nexit 0\n')
    script.chmod(0o755)
    return script


@pytest.fixture
def setup(tmp_path):
    base = BaseLayout(tmp_path / "base")
    make_checkpoint(base.root, "d20", steps=(20,))
    spec = write_spec(tmp_path, f"name: in\nlaunch: {{torchrun: {_recording_torchrun(tmp_path)}}}\n")
    args = [
        "continue",
        *spec_args(spec, base.root, tmp_path / "res"),
    ]
    return base, [*args, "--from-step", "20", "--variants", "pi"]


def _nan(path: Path) -> None:

    state = torch.load(path)
    state["lm_head.weight"][0, 0] = float("nan")
    torch.save(state, path)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


CORRUPTIONS = {
    "truncated model": (
        lambda b: _truncate(model_file(b.checkpoint_dir("d20"), 20)),
        "model_000020.pt: cannot read",
    ),
    "NaN model": (
        lambda b: _nan(model_file(b.checkpoint_dir("d20"), 20)),
        "model_000020.pt: non-finite values",
    ),
    "no tokenizer": (lambda b: (b.tokenizer_dir / "tokenizer.pkl").unlink(), "No tokenizer at"),
    "garbage token bytes": (
        lambda b: (b.tokenizer_dir / "token_bytes.pt").write_bytes(b"\0" * 10),
        "token_bytes.pt",
    ),
    "truncated shard": (
        lambda b: _truncate(sorted(b.data_dir.glob("*.parquet"))[0]),
        "Cannot read parquet shard",
    ),
    "no shards": (lambda b: [p.unlink() for p in b.data_dir.glob("*.parquet")], "No .parquet shards in"),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_broken_input_stops_the_run_before_any_clone(setup, tmp_path, corruption):
    base, args = setup
    damage, fragment = CORRUPTIONS[corruption]
    damage(base)
    outcome = run_main(*args)
    assert_named_error(outcome, fragment)
    assert not base.checkpoint_dir("d20-in-pi").exists() and not (tmp_path / "launched").exists()
    dry = run_main(*args, "--dry-run")  # a dry run shows it as a warning and says the run refuses it
    assert dry.code == 0 and "refuses to start with this" in dry.err


def test_a_broken_newest_checkpoint_of_a_resumed_tag_has_a_way_out(setup, tmp_path):
    base, args = setup
    assert run_main(*args).code == 0  # cloned (d20-in-pi@20), the stand-in "trains" nothing
    tag_dir = base.checkpoint_dir("d20-in-pi")
    for step in (30, 40):  # what the run saved, the newest truncated by a crash
        model_file(tag_dir, step).write_bytes(model_file(tag_dir, 20).read_bytes())
        meta_file(tag_dir, step).write_text(meta_file(tag_dir, 20).read_text())
    _truncate(model_file(tag_dir, 40))
    refused = run_main(*args, "--resume")
    assert_named_error(refused, "model_000040.pt: cannot read", "Resume from step 30")
    command = refused.err.split("newest readable one")[1].split(": ", 1)[1]
    argv = shlex.split(" ".join(command.split()))
    assert argv[:2] == ["rlab", "continue"] and argv[-2:] == ["--resume-from", "30"]
    resumed = run_main(*argv[1:])
    assert resumed.code == 0, resumed.text
    assert checkpoint_steps(tag_dir) == [20, 30]  # 40 set aside, not deleted
    (aside,) = list((tag_dir / "set_aside").iterdir())
    assert sorted(p.name for p in aside.iterdir())[:2] == ["meta_000040.json", "model_000040.pt"]
    assert "set aside" in resumed.err
    assert (ExperimentLayout(tmp_path / "res", "in").run_config("d20-in-pi")).exists()


def test_passkey_lengths_no_prompt_fits_are_refused_before_an_eval_starts(tmp_path):

    base = BaseLayout(tmp_path / "base")
    make_checkpoint(base.root, "d20", steps=(20,))
    need = shortest_prompt(Tokenizer.from_directory(base.tokenizer_dir))
    build_prompt(Tokenizer.from_directory(base.tokenizer_dir), need, 0.5, "50000")  # fits exactly
    with pytest.raises(EvalError):
        build_prompt(Tokenizer.from_directory(base.tokenizer_dir), need - 1, 0.5, "50000")
    args = ["eval", "--tag", "d20", "--base-dir", str(base.root), "--no-core", "--dry-run"]
    short = run_main(*args, "--lengths", "32,64")
    assert_named_error(
        short, "eval.lengths: no passkey prompt fits in 64 tokens", f"the shortest takes {need}"
    )
    assert run_main(*args, "--lengths", f"32,{need}").code == 0
    assert run_main(*args, "--lengths", "32,64", "--no-passkey").code == 0
