"""Spec bounds that match reality: each clearly invalid value is one error naming its YAML path and the allowed
range (none is accepted with exit 0), and the validator ends quickly on any input."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cli.harness import run_main
from tests.cli.test_fuzz import FUZZ, assert_no_traceback


def spec_text(extra: str) -> str:
    """A spec of experiment fz on base d20 at 1 process, plus `extra` (top-level keys; each key once: rlab refuses
    a duplicate)."""
    keys = {line.split(":", 1)[0] for line in extra.splitlines()}
    head = "".join(
        line
        for key, line in (
            ("name", "name: fz\n"),
            ("base", "base: {tag: d20, step: 10}\n"),
            ("launch", "launch: {nproc_per_node: 1}\n"),
        )
        if key not in keys
    )
    return head + extra + "\n"


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
    spec.write_text(spec_text(text))
    outcome = run_main("validate", "--spec-only", str(spec))
    assert_no_traceback(outcome)
    assert outcome.code == 1 and message in outcome.err, outcome.err[-1000:]


def test_a_dry_run_no_longer_prints_a_command_for_1e30_processes(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text("launch: {nproc_per_node: 1.0e+30}"))
    outcome = run_main("continue", "--spec", str(spec), "--dry-run", "--base-dir", str(tmp_path / "b"))
    assert outcome.code == 1 and "torchrun" not in outcome.out
    assert "launch.nproc_per_node: must be from 1 to 1,024" in outcome.err


MAX_CALLS = 2_000_000
"""Python function calls allowed per spec, validate and a dry run together: the work is bounded, not the time (a
loaded laptop's clock says nothing about a hang). A plain spec's validate + dry run takes ~10^5 calls; the
1e6-seeds spec that once hung planned a million tags (~10^8)."""


def calls_made(fn: Callable[[], Any]) -> tuple[Any, int]:
    """`fn()` and how many Python functions it called (a profile hook counts them)."""
    count = 0

    def hook(_frame, event, _arg):
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(hook)
    try:
        result = fn()
    finally:
        sys.setprofile(None)
    return result, count


def test_many_seeds_do_not_hang_the_validator(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text("train: {seeds: 1000000}"))
    outcome, calls = calls_made(
        lambda: run_main("continue", "--spec", str(spec), "--dry-run", "--base-dir", str(tmp_path / "b"))
    )
    assert outcome.code == 1 and calls < MAX_CALLS, calls


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
def test_the_validator_does_bounded_work_and_errors_on_extreme_values(field, value):

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(spec_text(_yaml_at(field, value)))
        (checked, dry), calls = calls_made(
            lambda: (
                run_main("validate", "--spec-only", str(spec)),
                run_main(
                    "continue", "--spec", str(spec), "--dry-run", "--base-dir", f"{tmp}/b", cwd=Path(tmp)
                ),
            )
        )
    assert calls < MAX_CALLS, (field, value[:80], calls)
    for outcome in (checked, dry):
        assert_no_traceback(outcome)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the spec is empty"),
        ("# only a comment\n", "the spec is empty"),
        ("name: a\nbase: {tag: d20}\nname: b\n", "key 'name' appears twice (line 3)"),
        ("name: a\nbase: {tag: d20, tag: d21}\n", "key 'tag' appears twice (line 2)"),
        (
            "name: a\ntrain: {seq_len: 512, steps: 10, seq_len_warmup: [{seq_len: 128, steps: 20}]}\n",
            "seq_len_warmup: its phases take 20 steps, more than the run's 10",
        ),
    ],
    ids=["empty", "comment-only", "duplicate-top-key", "duplicate-nested-key", "warmup-longer-than-run"],
)
def test_validate_refuses_empty_specs_duplicate_keys_and_a_warmup_longer_than_the_run(
    tmp_path, text, message
):
    """Issue 42, finding 7: these three passed `validate --spec-only` (PyYAML keeps the last of two keys)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    outcome = run_main("validate", "--spec-only", str(spec))
    assert_no_traceback(outcome)
    assert outcome.code == 1 and message in outcome.err, outcome.err[-1000:]
