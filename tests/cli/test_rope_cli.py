"""`rlab rope inspect`: JSON equals the transformers reference; bad input is one line, exit 1, no traceback."""

from __future__ import annotations

import json

import pytest

from tests.cli.harness import Outcome, run_main


def inspect_json(*args: str) -> dict:
    result = run_main("rope", "inspect", *args, "--json")
    assert result.code == 0, result.text
    return json.loads(result.out)


def assert_error_line(result: Outcome, message: str) -> None:
    """Exit 1, nothing on stdout, no traceback, and stderr's first line starting with `message`."""
    assert result.code == 1 and result.exception is None, result.text
    assert "Traceback" not in result.err and result.out == ""
    assert result.err.splitlines()[0].startswith(message), result.err


def hf_inv_freq(
    rope_type: str, head_dim: int, seq_len: int | None = None, **params
) -> tuple[list[float], float]:
    from transformers import PreTrainedConfig  # noqa: PLC0415 - optional dependency (transformers)
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: PLC0415 - optional dependency (transformers)

    config = PreTrainedConfig()
    config.hidden_size, config.num_attention_heads, config.head_dim = head_dim * 2, 2, head_dim
    config.max_position_embeddings = params.get("original_max_position_embeddings", 2048)
    config.rope_parameters = {"rope_type": rope_type, "rope_theta": 10000.0, **params}
    freqs, factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    return freqs.tolist(), factor


def assert_rel(ours: list[float], ref: list[float]) -> None:
    assert len(ours) == len(ref)
    assert max(abs(a - b) / abs(b) for a, b in zip(ours, ref, strict=True)) <= 1e-5


def test_yarn_json_equals_reference():
    """rlab rope inspect --variant yarn --head-dim 128 --scale 4 --original-len 2048 --json: transformers' numbers."""
    got = inspect_json("--variant", "yarn", "--head-dim", "128", "--scale", "4", "--original-len", "2048")
    ref, factor = hf_inv_freq("yarn", 128, factor=4.0, original_max_position_embeddings=2048)
    assert_rel(got["inv_freq"], ref)
    assert got["attention_factor"] == pytest.approx(factor, rel=1e-9)
    assert got["logit_scale"] == pytest.approx(factor**2)
    assert got["rope"]["variant"] == "yarn" and got["rope"]["beta_fast"] == 32.0


@pytest.mark.parametrize(
    ("args", "rope_type", "seq_len", "params"),
    [
        (["--variant", "pi", "--head-dim", "64", "--scale", "2"], "linear", None, {"factor": 2.0}),
        (
            [
                "--variant",
                "dynamic-ntk",
                "--head-dim",
                "64",
                "--scale",
                "4",
                "--original-len",
                "1024",
                "--seq-len",
                "3000",
            ],
            "dynamic",
            3000,
            {"factor": 4.0, "original_max_position_embeddings": 1024},
        ),
        (
            ["--variant", "llama3", "--head-dim", "128", "--scale", "8", "--original-len", "8192"],
            "llama3",
            None,
            {
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            },
        ),
    ],
)
def test_other_variants_json_equal_reference(args, rope_type, seq_len, params):
    got = inspect_json(*args)
    ref, factor = hf_inv_freq(rope_type, int(args[3]), seq_len, **params)
    assert_rel(got["inv_freq"], ref)
    assert got["attention_factor"] == factor == 1.0


def test_table_output():
    result = run_main("rope", "inspect", "--variant", "yarn", "--scale", "4")
    assert result.code == 0, result.text
    assert "wavelength (tokens)" in result.out and "ratio to rope" in result.out
    assert "[beta_slow, beta_fast]" in result.out  # the formula survives rich markup
    assert "showing 16 of 64" in result.out
    assert "logits x1.29648" in result.out


def test_help_lists_rope():
    result = run_main("rope", "--help")
    assert result.code == 0 and "inspect" in result.out


def test_a_negative_scale_is_the_spec_bound_error():
    result = run_main("rope", "inspect", "--variant", "pi", "--scale", "-1")
    assert_error_line(result, "Error: --scale: must be from 0 to 1,024 (got -1.0)")  # the spec bound
    assert result.err.splitlines()[0] == "Error: --scale: must be from 0 to 1,024 (got -1.0)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--variant", "yarm"],
            "Error: Unknown RoPE variant 'yarm'. Did you mean 'yarn'? Available: abf, dynamic-ntk, llama3, longrope, ntk, ntk-by-parts, pi, rope, yarn.",
        ),
        (["--variant", "pi", "--scale", "0"], "Error: --scale: must be > 0 (got 0.0)"),
        (
            ["--variant", "yarn", "--scale", "0.5"],
            "Error: --scale: must be >= 1 for variant 'yarn' (got 0.5)",
        ),
        (
            ["--variant", "yarn", "--scale", "2", "--beta-fast", "1", "--beta-slow", "2"],
            "Error: --beta-fast: must be > beta_slow (got 1.0 <= 2.0)",
        ),
        (["--head-dim", "7"], "Error: --head-dim: must be a positive even number (got 7)"),
    ],
)
def test_bad_input_one_line_exit_1_no_traceback(args, message):
    result = run_main("rope", "inspect", *args)
    assert_error_line(result, message)
    assert result.err.splitlines()[0] == message


def test_abf_longrope_and_ntk_by_parts_json_equal_reference(tmp_path):
    """`rlab rope inspect --variant abf / longrope / ntk-by-parts` match transformers."""
    abf = inspect_json("--variant", "abf", "--head-dim", "128", "--base", "10000", "--new-base", "500000")
    ref, _ = hf_inv_freq("linear", 128, factor=1.0, rope_theta=500000.0)  # default rope at the new theta
    assert_rel(abf["inv_freq"], ref) and abf["attention_factor"] == 1.0

    parts = inspect_json(
        "--variant", "ntk-by-parts", "--head-dim", "64", "--scale", "4", "--original-len", "2048"
    )
    ref, factor = hf_inv_freq(
        "yarn", 64, factor=4.0, original_max_position_embeddings=2048, attention_factor=1.0
    )
    assert_rel(parts["inv_freq"], ref) and parts["attention_factor"] == factor == 1.0

    factors = {
        "short_factor": [1.0 + i / 100 for i in range(32)],
        "long_factor": [1.0 + i / 8 for i in range(32)],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"rope_scaling": {"type": "longrope", **factors}}))
    for seq_len in ("2048", "8192"):
        got = inspect_json(
            "--variant", "longrope", "--head-dim", "64", "--scale", "4", "--original-len", "2048",
            "--factors-file", str(path), "--seq-len", seq_len,
        )  # fmt: skip
        ref, factor = hf_inv_freq(
            "longrope", 64, int(seq_len), factor=4.0, original_max_position_embeddings=2048, **factors
        )
        assert_rel(got["inv_freq"], ref)
        assert got["attention_factor"] == pytest.approx(factor, rel=1e-9) and factor > 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "abf"], "Error: --new-base: required for variant 'abf'"),
        (["--variant", "abf", "--new-base", "5000"], "Error: --new-base: must be above base for abf"),
        (
            ["--variant", "longrope", "--factors-file", "/nonexistent.json"],
            "Error: --factors-file: cannot read",
        ),
    ],
)
def test_abf_and_longrope_bad_input_names_the_flag(args, message):
    assert_error_line(run_main("rope", "inspect", *args), message)


def test_geometry_in_json_and_table():
    got = inspect_json("--variant", "ntk", "--scale", "4", "--base", "100000", "--window", "512")
    geometry = got["geometry"]
    assert (
        got["target_len"] == 8192
        and geometry["critical_pairs_l0"] == 33
        and geometry["critical_dim_l0"] == 66
    )
    assert geometry["base_lower_bound"] == pytest.approx(0.0424 * 8192**1.628)
    assert got["window_pairs"] == sum(1 for f in got["inv_freq"] if 2 * 3.141592653589793 / f <= 512)
    result = run_main("rope", "inspect", "--variant", "ntk", "--scale", "4")
    assert result.code == 0, result.text
    text = " ".join(result.out.split())  # rich wraps at the terminal's width
    assert "in target" in text and "critical dimension (Liu et al. 2024): 41 of 64" in text
    assert "warning: ntk: rotary base 4.09e+04 is below 1.0e+05" in text
