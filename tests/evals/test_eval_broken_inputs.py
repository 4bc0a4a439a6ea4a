"""`rlab eval` on broken inputs, through the real CLI and worker: one clear error line, non-zero exit,
nothing written; and a fresh eval.log per run. (The checkpoint loader's own checks are tested with it.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlab.paths import ExperimentLayout, meta_file, model_file
from tests.cli.harness import Outcome, run_main
from tests.evals.test_runner import TAG, make_base


def _eval(base: Path, results: Path, nproc: int = 1) -> Outcome:
    return run_main(
        "eval",
        "--tag",
        TAG,
        "--base-dir",
        str(base),
        "--base-tag",
        "d2",
        "-e",
        "drill",
        "--results-dir",
        str(results),
        "--nproc",
        str(nproc),
        "--no-bpb-length",
        "--no-core",
        "--no-passkey",
        env={"OMP_NUM_THREADS": "1", "RLAB_DEBUG": None},
    )


def _assert_one_line_error(proc: Outcome, *needles: str) -> None:
    assert proc.code != 0, proc.out
    assert "Traceback" not in proc.err and "torch.distributed" not in proc.err, proc.err[-2000:]
    error = [line for line in proc.err.splitlines() if line.lower().startswith("error")]
    assert error, proc.err[-2000:]
    for needle in needles:
        assert needle in proc.err, (needle, proc.err[-2000:])


def _put_nan_in_checkpoint(base: Path) -> None:

    path = model_file(base / "base_checkpoints" / TAG, 5)
    state = torch.load(path)
    state["lm_head.weight"][3, 1] = float("nan")
    torch.save(state, path)


@pytest.fixture
def eval_inputs(tiny_base_dir, tmp_path):
    base = make_base(tiny_base_dir, tmp_path)
    return base, tmp_path / "results", ExperimentLayout(tmp_path / "results", "drill")


def test_nan_checkpoint_fails_loudly_and_writes_nothing(eval_inputs):
    base, results, layout = eval_inputs
    _put_nan_in_checkpoint(base)
    proc = _eval(base, results)
    _assert_one_line_error(proc, TAG)
    assert "done" not in proc.out.lower() and not layout.eval_json(TAG).exists()


def test_failure_under_torchrun_shows_the_worker_s_reason_once_and_none_of_torchrun_s_output(eval_inputs):
    """With 2 processes torchrun prints its own banner, a traceback and a ChildFailedError box, and each rank
    its error line: the terminal gets the reason once; eval.log keeps everything."""
    base, results, layout = eval_inputs
    _put_nan_in_checkpoint(base)
    proc = _eval(base, results, nproc=2)
    _assert_one_line_error(proc, TAG, "non-finite")
    assert proc.err.count("non-finite") == 1 and "OMP_NUM_THREADS" not in proc.err, proc.err
    logged = layout.eval_log(TAG).read_text()
    assert logged.count("error: ") == 2 and "ChildFailedError" in logged  # one per rank, and torchrun's box


def test_garbage_meta_names_the_file(eval_inputs):
    base, results, layout = eval_inputs
    meta_file(base / "base_checkpoints" / TAG, 5).write_text('{"step": 5, "model_config": ')
    proc = _eval(base, results)
    _assert_one_line_error(proc, "meta_000005.json")
    assert not layout.eval_json(TAG).exists()


def test_eval_log_starts_fresh_each_run(eval_inputs):
    base, results, layout = eval_inputs
    ok = _eval(base, results)
    assert ok.code == 0, ok.err[-2000:]
    assert "val bpb" in ok.out and layout.eval_json(TAG).is_file()
    first = layout.eval_log(TAG).read_text()
    assert first.count("bpb") >= 1
    meta_file(base / "base_checkpoints" / TAG, 5).write_text("not json")
    failed = _eval(base, results)
    assert failed.code != 0
    log = layout.eval_log(TAG).read_text()
    assert log and first not in log  # the failure's log holds this run's lines only
    assert layout.eval_json(TAG).is_file()  # the earlier, complete eval is kept
