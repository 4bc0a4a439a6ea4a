"""Spec bounds that match reality: each clearly invalid value is one error naming its YAML path and the allowed
range (none is accepted with exit 0), and the validator ends quickly on any input."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cli.harness import run_main
from tests.cli.test_fuzz import FUZZ, assert_no_traceback

BASE = "name: fz\nbase: {tag: d20, step: 10}\nlaunch: {nproc_per_node: 1}\n"

INVALID = [
    ("train: {seeds: 1000000}", "train.seeds: must be from 1 to 64 (got 1000000)"),
    ("launch: {nproc_per_node: 1.0e+30}", "launch.nproc_per_node: must be from 1 to 1,024"),
    ("train: {seq_len: 9223372036854775808}", "train.seq_len: must be from 1 to 16,777,216"),
    ("train: {seq_len: 1.0e+9}", "train.seq_len: must be from 1 to 16,777,216"),
    ("eval: {lengths: []}", "eval.lengths: must list 1 to 64 entries (got 0)"),
    ("eval: {lengths: [1, 2]}", "eval.lengths.0: must be from 16 to 16,777,216 (got 1)"),
    ("eval: {evals: []}", "eval.evals: must list 1 to 8 entries (got 0)"),
    (
        "variants: {pi: {variant: pi, factor: 1.0e+300}}",
        "variants.pi.factor: must be from 0 to 1,024 (got 1e+300)",
    ),
    ("train: {steps: 1000000000000}", "train.steps: must be from 0 to 1,000,000,000"),
    ("train: {device_batch_size: 1000000000}", "train.device_batch_size: must be from 1 to 1,048,576"),
    (
        "train: {total_batch_size: 1125899906842624}",
        "train.total_batch_size: must be from 1 to 1,099,511,627,776",
    ),
    ("train: {keep_last: 1000000000000}", "train.keep_last: must be from 1 to 1,000,000,000"),
    ("train: {save_every: 1000000000000}", "train.save_every: must be from 1 to 1,000,000,000"),
    ("scale: 1.0e+9", "scale: must be from 1 to 1,024"),
    ("target_len: 1099511627776", "target_len: must be from 1 to 16,777,216"),
    (
        "variants: {pi: {variant: pi, original_len: 1000000000}}",
        "variants.pi.original_len: must be from 1 to 16,777,216",
    ),
    (
        "variants: {pi: {variant: pi, base: 1.0e+300}}",
        "variants.pi.base: must be from 2 to 1,000,000,000,000",
    ),
    ("launch: {nnodes: 1000000000, rdzv_endpoint: h}", "launch.nnodes: must be from 1 to 65,536"),
    ("launch: {max_restarts: 1000000000}", "launch.max_restarts: must be from 0 to 1,000"),
    ("eval: {passkey_trials: 1000000000}", "eval.passkey_trials: must be from 1 to 100,000"),
    ("eval: {ruler_tasks: []}", "eval.ruler_tasks: must list 1 to 64 entries (got 0)"),
    ("eval: {passkey_lengths: []}", "eval.passkey_lengths: must list 1 to 64 entries (got 0)"),
    ("eval: {copy_lengths: [8]}", "eval.copy_lengths.0: must be from 16 to 16,777,216 (got 8)"),
    ("pretrain: {model: {n_layer: 100000}}", "pretrain.model.n_layer: must be from 1 to 1,024"),
    ("name: " + "x" * 1000, "name: must be 1 to 100 characters (got 1,000)"),
    ("train: {seeds: " + "9" * 5000 + "}", "a value that cannot be read: a number of more than 4,300 digits"),
    (
        "train: {seeds: " + "9" * 3000 + "}",
        "train.seeds: must be from 1 to 64 (got a number of 3,000 digits)",
    ),
]


@pytest.mark.parametrize("text, message", INVALID, ids=[t[:40] for t, _ in INVALID])
def test_a_clearly_invalid_spec_names_its_path_and_range(tmp_path, text, message):
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE + text + "\n")
    outcome = run_main("validate", "--spec-only", str(spec))
    assert_no_traceback(outcome)
    assert outcome.code == 1 and message in outcome.err, outcome.err[-1000:]


def test_a_dry_run_no_longer_prints_a_command_for_1e30_processes(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE + "launch: {nproc_per_node: 1.0e+30}\n")
    outcome = run_main("continue", "--spec", str(spec), "--dry-run", "--base-dir", str(tmp_path / "b"))
    assert outcome.code == 1 and "torchrun" not in outcome.out
    assert "launch.nproc_per_node: must be from 1 to 1,024" in outcome.err


def test_many_seeds_do_not_hang_the_validator(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE + "train: {seeds: 1000000}\n")
    start = time.monotonic()
    outcome = run_main("continue", "--spec", str(spec), "--dry-run", "--base-dir", str(tmp_path / "b"))
    assert outcome.code == 1 and time.monotonic() - start < 10


SPEC_TIME_BOUND_S = 20.0
"""Per spec, validate and a dry run together (generous: the test machine's CPU is shared)."""

FIELDS = [
    "train.seeds",
    "train.seq_len",
    "train.steps",
    "train.device_batch_size",
    "launch.nproc_per_node",
    "launch.nnodes",
    "eval.lengths",
    "eval.evals",
    "eval.passkey_depths",
    "variants.pi.factor",
    "variants.pi.original_len",
    "target_len",
    "scale",
    "name",
    "base.tag",
    "train.seq_len_warmup",
    "eval.core_tasks",
    "launch.env",
    "pretrain.model.n_layer",
]


def _huge(digits: int) -> str:
    return "9" * digits


def _nested(depth: int, leaf: str) -> str:
    return "[" * depth + leaf + "]" * depth


yaml_values = st.one_of(
    st.integers(min_value=1, max_value=8000).map(_huge),  # past Python's 4300-digit limit too
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from(["1.0e+300", "-1.0e+300", ".inf", ".nan", "1.0e-320", "0", "-1"]),
    st.tuples(st.integers(1, 3000), st.sampled_from(["1", "", "{}", "x"])).map(lambda t: _nested(*t)),
    st.integers(1, 200_000).map(lambda n: "x" * n),  # long strings
    st.integers(0, 5000).map(lambda n: "[" + ", ".join(["256"] * n) + "]"),  # long lists
    st.integers(1, 2000).map(lambda n: "{" * n + "a: 1" + "}" * n),
)


def _yaml_at(dotted: str, value: str) -> str:
    *parents, leaf = dotted.split(".")
    text = f"{leaf}: {value}"
    for key in reversed(parents):
        text = f"{key}: {{{text}}}"
    return text


@FUZZ
@given(field=st.sampled_from(FIELDS), value=yaml_values)
def test_the_validator_ends_quickly_with_an_error_on_extreme_values(field, value):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(BASE + _yaml_at(field, value) + "\n")
        start = time.monotonic()
        checked = run_main("validate", "--spec-only", str(spec))
        dry = run_main("continue", "--spec", str(spec), "--dry-run", "--base-dir", f"{tmp}/b", cwd=Path(tmp))
        elapsed = time.monotonic() - start
    assert elapsed < SPEC_TIME_BOUND_S, (field, value[:80], elapsed)
    for outcome in (checked, dry):
        assert_no_traceback(outcome)
