"""Flags beat the environment beat paths recorded in a spec rlab wrote; a moved results folder works in place."""

from __future__ import annotations

import shutil

from rlab.orchestrate.plan import plan_continue
from rlab.orchestrate.preflight import results_dir_error
from rlab.orchestrate.tag_setup import save_resolved_specs
from rlab.paths import ExperimentLayout, eval_bundle_cache, find_eval_bundle
from rlab.spec.loading import load_spec
from tests.cli.harness import assert_user_error, run_main
from tests.orchestrate.helpers import continue_from, make_checkpoint


def test_recorded_paths_yield_to_flags_env_and_where_the_folder_lies(tmp_path, monkeypatch):
    spec = load_spec(
        None, base_dir=tmp_path / "base0", results_dir=tmp_path / "orig", from_step=1, variants="pi"
    )
    save_resolved_specs(spec, plan_continue(spec))
    shutil.copytree(tmp_path / "orig", tmp_path / "copy")
    copy = ExperimentLayout(tmp_path / "copy", "d20")
    monkeypatch.delenv("RLAB_RESULTS_DIR")
    monkeypatch.delenv("RLAB_BASE_DIR")
    for recorded in (copy.resolved_spec, copy.tag_spec("d20-pi")):
        moved = load_spec(recorded)
        assert moved.results_dir == (tmp_path / "copy").resolve()  # where the copy lies, not the original
        assert moved.base.base_dir == tmp_path / "base0"  # recorded, nothing beats it here
    monkeypatch.setenv("RLAB_RESULTS_DIR", str(tmp_path / "env_res"))
    monkeypatch.setenv("RLAB_BASE_DIR", str(tmp_path / "env_base"))
    env = load_spec(copy.resolved_spec)
    assert (env.results_dir, env.base.base_dir) == (tmp_path / "env_res", tmp_path / "env_base")
    flags = load_spec(copy.resolved_spec, results_dir=tmp_path / "f_res", base_dir=tmp_path / "f_base")
    assert (flags.results_dir, flags.base.base_dir) == (tmp_path / "f_res", tmp_path / "f_base")
    # a spec the user wrote keeps its own paths: they are the user's words, not a record
    own = tmp_path / "mine.yaml"
    own.write_text(f"results_dir: {tmp_path / 'mine'}\nbase: {{base_dir: {tmp_path / 'mybase'}}}\n")
    mine = load_spec(own)
    assert (mine.results_dir, mine.base.base_dir) == (tmp_path / "mine", tmp_path / "mybase")


def test_an_unwritable_results_dir_is_an_error_not_a_write_elsewhere(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert results_dir_error(tmp_path / "fresh" / "results") is None
    assert "cannot be written" in results_dir_error(blocker / "results").message
    make_checkpoint(tmp_path / "base", "d20", steps=(10,))
    result = run_main(
        "continue",
        "--base-dir",
        str(tmp_path / "base"),
        *continue_from(10, "pi"),
        "--results-dir",
        str(blocker / "results"),
    )
    assert_user_error(result, f"Results dir {blocker / 'results' / 'd20'} cannot be written", "--results-dir")
    assert not (tmp_path / "base" / "base_checkpoints" / "d20-pi").exists()
    evaluated = run_main(
        "eval",
        "--tag",
        "d20",
        "--base-dir",
        str(tmp_path / "base"),
        "--results-dir",
        str(blocker / "results"),
        "--no-core",
    )
    assert_user_error(evaluated, "cannot be written")


def test_the_core_bundle_is_found_in_order(tmp_path, monkeypatch):
    """--eval-bundle, then $RLAB_EVAL_BUNDLE (both taken as given), then <base>/eval_bundle, then the cache
    `rlab bundle download` fills (the default base dir's); nothing beside the checkout."""

    def bundle(path):
        path.mkdir(parents=True)
        (path / "core.yaml").write_text("icl_tasks: []\n")
        return path

    base = tmp_path / "base_a"  # $RLAB_BASE_DIR (the autouse fixture) is tmp_path / "base": the cache's base
    assert eval_bundle_cache() == tmp_path / "base" / "eval_bundle"
    assert find_eval_bundle(base) is None
    cache = bundle(eval_bundle_cache())
    assert find_eval_bundle(base) == cache
    own = bundle(base / "eval_bundle")
    assert find_eval_bundle(base) == own
    monkeypatch.setenv("RLAB_EVAL_BUNDLE", str(tmp_path / "from_env"))  # named: used even before it exists
    assert find_eval_bundle(base) == tmp_path / "from_env"
    assert find_eval_bundle(base, tmp_path / "flag") == tmp_path / "flag"
