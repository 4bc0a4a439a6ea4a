"""`rlab sample` end to end on a tiny random checkpoint (real tokenizer, real engine)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rlab.cli.app import app
from tests.evals.test_runner import TAG, make_base


@pytest.fixture
def base(tiny_base_dir, tmp_path):
    return make_base(tiny_base_dir, tmp_path)


def test_sample_prints_each_sample(base):
    result = CliRunner().invoke(
        app,
        [
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
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("The king") == 3 and "sample 3/3" in result.output


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
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert first.output == CliRunner().invoke(app, args).output


def test_unknown_tag_is_a_clear_error(base):
    from rlab.errors import CheckpointError

    result = CliRunner().invoke(app, ["sample", "--tag", "nope", "--base-dir", str(base)])
    assert result.exit_code != 0
    assert isinstance(result.exception, CheckpointError) and "nope" in str(result.exception)
