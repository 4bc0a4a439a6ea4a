"""`rlab sample` end to end on a tiny random checkpoint (real tokenizer, real engine)."""

from __future__ import annotations

import pytest

from tests.cli.harness import assert_clean_error, run_main
from tests.evals.test_runner import TAG, make_base


@pytest.fixture
def base(tiny_base_dir, tmp_path):
    return make_base(tiny_base_dir, tmp_path)


def test_sample_prints_each_sample(base):
    result = run_main(
        "sample",
        "--tag",
        TAG,
        "--prompt",
        "The king",
        "--num-samples",
        "3",
        "--max-tokens",
        "8",
        "--temperature",
        "1.0",
        "--top-k",
        "50",
        "--base-dir",
        str(base),
    )
    assert result.code == 0, result.text
    assert result.out.count("The king") == 3 and "sample 3/3" in result.out


def test_greedy_sample_is_deterministic(base):
    args = [
        "sample",
        "--tag",
        TAG,
        "--prompt",
        "In 1900",
        "--temperature",
        "0",
        "--max-tokens",
        "6",
        "--base-dir",
        str(base),
    ]
    first = run_main(*args)
    assert first.code == 0, first.text
    assert first.out == run_main(*args).out


def test_unknown_tag_is_a_clear_error(base):
    result = run_main("sample", "--tag", "nope", "--base-dir", str(base))
    assert_clean_error(result, "nope")
