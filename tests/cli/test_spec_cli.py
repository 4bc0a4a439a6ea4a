"""`rlab validate` and `rlab schema` through the real entry point."""

from __future__ import annotations

import json

from tests.cli.harness import assert_user_error, run_main
from tests.conftest import EVAL_BUNDLE_DIR
from tests.orchestrate.helpers import EXPERIMENTS, d20_base


def test_validate_ok(tmp_path):
    base = d20_base(tmp_path / "d20")
    result = run_main("validate", str(EXPERIMENTS / "rope_scaling_d20.yaml"), "--base-dir", str(base))
    assert result.code == 0, result.err
    assert "OK" in result.out and "4 variant(s): rope, pi, ntk, yarn" in result.out
    # the same spec against a base dir without d20: what `rlab continue` would refuse, said now
    assert_user_error(
        run_main("validate", str(EXPERIMENTS / "rope_scaling_d20.yaml")), "Base tag 'd20' not found"
    )
    assert run_main("validate", str(EXPERIMENTS / "rope_scaling_d20.yaml"), "--spec-only").code == 0


def test_validate_reports_every_problem_with_its_yaml_path(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "base: {tag: 'd20 x'}\n"
        "variants:\n  yarn: {variant: yarn, factor: 4, beta_fast: 1, beta_slow: 2}\n  pi: {variant: pii}\n"
        "train: {steps: -5, lr: {warmdown_frac: 2}}\n"
        "launch: {nnodes: 2, gpus_per_variant: 3}\n"
        "tracking: {wandb: maybe}\n"
    )
    result = run_main("validate", str(spec))
    assert_user_error(
        result,
        f"{spec}:",
        "base.tag:",
        "variants.yarn.beta_fast: must be > beta_slow",
        "train.steps: must be from 0 to 1,000,000,000 (got -5)",
        "train.lr.warmdown_frac:",
        "launch.rdzv_endpoint: required when nnodes > 1",
        "tracking.wandb:",
    )
    problems = [line for line in result.err.splitlines() if line.startswith("  ")]
    assert len(problems) >= 6  # all at once, one line each


def test_validate_yaml_syntax_and_missing_file(tmp_path):
    spec = tmp_path / "broken.yaml"
    spec.write_text("train:\n  steps: [1, 2\n")
    assert_user_error(run_main("validate", str(spec)), "not valid YAML", "line")
    assert_user_error(run_main("validate", str(tmp_path / "nope.yaml")), "Spec file not found")


def test_schema_is_json_schema(tmp_path):
    result = run_main("schema")
    assert result.code == 0
    schema = json.loads(result.out)
    assert set(schema["properties"]) >= {
        "base",
        "variants",
        "train",
        "eval",
        "launch",
        "tracking",
        "pretrain",
    }
    out = tmp_path / "schema.json"
    assert run_main("schema", "--output", str(out)).code == 0
    assert json.loads(out.read_text()) == schema


def test_validate_checks_core_task_names_against_the_bundle(tmp_path):

    base = d20_base(tmp_path / "d20")
    text = (EXPERIMENTS / "rope_scaling_d20.yaml").read_text()
    spec = tmp_path / "tasks.yaml"
    spec.write_text(
        text.replace("eval:\n", f"eval:\n  core_bundle: {EVAL_BUNDLE_DIR}\n  core_tasks: [hellaswg]\n", 1)
    )
    # a typo in eval.core_tasks is found before any training, not at `rlab eval` hours later
    assert_user_error(
        run_main("validate", str(spec), "--base-dir", str(base)),
        "Unknown CORE task 'hellaswg'. Did you mean 'hellaswag'?",
    )
    spec.write_text(
        text.replace("eval:\n", f"eval:\n  core_bundle: {EVAL_BUNDLE_DIR}\n  core_tasks: [hellaswag]\n", 1)
    )
    assert run_main("validate", str(spec), "--base-dir", str(base)).code == 0
