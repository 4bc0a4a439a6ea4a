"""lm-eval-style CORE task selection through `rlab eval`: listing, --tasks with globs, did-you-mean, and a
real run whose eval.json says which tasks it scored (so a subset is never compared with another set)."""

from __future__ import annotations

import json
import shutil

import torch

from rlab.evals.runner import run_evals
from rlab.paths import ExperimentLayout
from rlab.records.eval_doc import read_eval_doc
from rlab.report.sources.comparability import mismatches
from rlab.spec.run import EvalRunConfig, read_config
from tests.cli.harness import assert_user_error, run_main
from tests.conftest import EVAL_BUNDLE_DIR
from tests.evals.test_runner import TAG, make_base
from tests.orchestrate.helpers import EXPERIMENTS, make_checkpoint, spec_args

BUNDLE = str(EVAL_BUNDLE_DIR)


def test_list_tasks_prints_the_bundle_labels():
    result = run_main("eval", "--list-tasks", "--eval-bundle", BUNDLE)
    assert result.code == 0, result.err
    assert "CORE tasks in" in result.out and "(22)" in result.out  # the title wraps a long path
    for label in ("hellaswag_zeroshot", "arc_easy", "bigbench_language_identification"):
        assert label in result.out
    assert "Traceback" not in result.err and "missing, CORE will be partial" not in result.err
    listed = json.loads(run_main("eval", "--tasks", "list", "--json", "--eval-bundle", BUNDLE).out)
    assert (
        listed["bundle"] == BUNDLE
        and len(listed["tasks"]) == 22
        and listed["tasks"][0]
        == {
            "task": "hellaswag_zeroshot",
            "type": "multiple_choice",
            "fewshot": 0,
            "baseline_pct": 25.0,
            "present": True,
        }
    )


def test_list_tasks_without_a_bundle_is_one_clear_error(tmp_path):
    cache = tmp_path / "base" / "eval_bundle"  # $RLAB_BASE_DIR's: where `rlab bundle download` puts it
    assert_user_error(
        run_main("eval", "--list-tasks", "--base-dir", str(tmp_path / "nowhere")),
        f"No CORE eval bundle in {tmp_path / 'nowhere' / 'eval_bundle'} and {cache}.",
        "rlab bundle download",
        "$RLAB_EVAL_BUNDLE",
    )
    given = run_main("eval", "--list-tasks", "--eval-bundle", str(tmp_path / "nope"))
    assert_user_error(given, f"CORE eval bundle not found: {tmp_path / 'nope'}")


def test_the_bundle_comes_from_the_environment_or_the_download_cache(tmp_path):

    nowhere = ["eval", "--list-tasks", "--json", "--base-dir", str(tmp_path / "nowhere")]
    listed = run_main(*nowhere, env={"RLAB_EVAL_BUNDLE": BUNDLE})
    assert listed.code == 0, listed.err
    assert json.loads(listed.out)["bundle"] == BUNDLE
    shutil.copytree(EVAL_BUNDLE_DIR, tmp_path / "base" / "eval_bundle")  # as `rlab bundle download` leaves it
    cached = run_main(*nowhere)
    assert cached.code == 0, cached.err
    assert json.loads(cached.out)["bundle"] == str(tmp_path / "base" / "eval_bundle")


def test_eval_without_a_bundle_says_how_to_get_one_before_anything_runs(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(base, "demo-yarn")
    common = ["--tag", "demo-yarn", "--spec", str(EXPERIMENTS / "demo.yaml"), "--base-dir", str(base)]
    results = ["--results-dir", str(tmp_path / "res")]
    assert_user_error(
        run_main("eval", *common, *results, "--nproc", "1"),
        "No CORE eval bundle in",
        "rlab bundle download",
        "$RLAB_EVAL_BUNDLE",
        "--no-core",
    )
    assert not (tmp_path / "res").exists()
    planned = run_main("eval", *common, *results, "--dry-run", "--nproc", "1")  # a plan, and the same warning
    assert planned.code == 0 and "No CORE eval bundle in" in planned.err


def test_unknown_task_says_did_you_mean_before_anything_runs(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(base, "demo-yarn")
    common = [
        "--tag",
        "demo-yarn",
        *spec_args(EXPERIMENTS / "demo.yaml", base, tmp_path / "res"),
        "--eval-bundle",
        BUNDLE,
    ]
    result = run_main("eval", *common, "--tasks", "hellaswg,arc_easy")
    assert_user_error(
        result, "Unknown CORE task 'hellaswg'. Did you mean 'hellaswag'?", "rlab eval --list-tasks"
    )
    assert len(result.err.strip().splitlines()) == 2
    assert_user_error(
        run_main("eval", *common, "--tasks", "arc_*,winogrnde*"), "No CORE task matches 'winogrnde*'."
    )
    assert_user_error(
        run_main("eval", *common, "--tasks", "arc_easy", "--no-core"),
        "--tasks picks CORE tasks, --no-core turns CORE off.",
    )
    assert_user_error(
        run_main("eval", *common, "--tasks", "arc easy"), "eval.core_tasks.0", "should match pattern"
    )
    assert not (tmp_path / "res").exists()


def test_tasks_turn_core_on_and_reach_the_worker_config(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(base, "demo-yarn")
    result = run_main(
        "eval",
        "--tag",
        "demo-yarn",
        *spec_args(EXPERIMENTS / "demo.yaml", base, tmp_path / "res"),
        "--eval-bundle",
        BUNDLE,
        "--tasks",
        "hellaswag,arc_*",
        "--dry-run",
        "--json",
        "--nproc",
        "1",
    )
    assert result.code == 0, result.err
    cfg = json.loads(result.out)["tags"][0]["config"]["eval"]
    assert "core" in cfg["evals"] and cfg["core_tasks"] == [
        "hellaswag",
        "arc_*",
    ]  # demo.yaml runs no CORE itself


def test_a_real_subset_run_records_its_tasks_and_is_not_comparable_with_another_set(tiny_base_dir, tmp_path):

    base = make_base(tiny_base_dir, tmp_path)
    results = tmp_path / "res"
    result = run_main(
        "eval",
        "--tag",
        TAG,
        "--tasks",
        "copa",
        "--base-dir",
        str(base),
        "--results-dir",
        str(results),
        "--eval-bundle",
        BUNDLE,
        "--experiment",
        "x",
        "--no-bpb",
        "--no-bpb-length",
        "--no-passkey",
        "--no-ruler",
        "--max-per-task",
        "3",
        "--nproc",
        "1",
    )
    assert result.code == 0, result.err
    assert "CORE (1 of 22 tasks)" in result.out
    assert "core: 3/3 (100%)" in result.err  # not a terminal: the worker logs its progress every 10%
    layout = ExperimentLayout(results, "x")
    log = layout.eval_log(TAG).read_text()
    assert "rlab-progress" not in log and "core: 3/3 (100%)" in log
    a = read_eval_doc(layout.eval_json(TAG))
    assert a.metrics.core.selection == ["copa"] and a.metrics.core.bundle_tasks == 22
    assert list(a.metrics.core.tasks) == ["copa"] and not a.metrics.core.partial
    assert a.measured["core"].settings["core_tasks"] == ["copa"]
    assert "cropped_to" in a.measured["core"].settings  # the context prompts were cropped to (None: none was)
    listed = run_main("ls", "--base-dir", str(base), "--results-dir", str(results))
    row = next(line for line in listed.out.splitlines() if TAG in line)
    assert f"{a.metrics.core.core:.3f} (1/22)" in row, listed.out  # rlab ls never shows it as the full CORE
    # the same tag with another task set (the worker itself, in this process, to keep the test short)
    cfg = read_config(layout.eval_run_config(TAG), EvalRunConfig)
    torch.set_num_threads(1)
    b = run_evals(
        cfg.model_copy(
            update={
                "tag": TAG,
                "out_dir": tmp_path / "other",
                "core_csv": tmp_path / "o.csv",
                "eval": cfg.eval.model_copy(update={"core_tasks": ("cop*", "winograd")}),
            }
        )
    )
    assert b.metrics.core.selection == ["copa", "winograd"] and b.metrics.core.label == "CORE (2 of 22 tasks)"
    found = [m for m in mismatches(a, b) if m.section == "core"]
    assert {m.what for m in found} == {"eval settings", "eval data"}
    assert (
        "core_tasks: ['copa'] vs ['copa', 'winograd']"
        in next(m for m in found if m.what == "eval settings").detail
    )
