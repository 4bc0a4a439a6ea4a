"""Tags and experiments are names, never paths (issue 42, finding 2).

`rlab eval --tag /abs/other/base_checkpoints/d2` (or `../../x/base_checkpoints/d2`, `d2/../d2`) used to exit 0,
evaluate a checkpoint outside --base-dir and write eval.json, logs and CSVs into that folder; `sample --tag` the
same. Every --tag/--base-tag/--experiment now goes through the spec's name rule (`rlab.paths.name_problem`), and
`rlab.paths`' layouts refuse a path where a name belongs, so nothing is read or written outside the base and
results dirs whichever command asks.
"""

from __future__ import annotations

import pytest

from rlab.errors import SpecError
from rlab.paths import BaseLayout, ExperimentLayout
from tests.cli.harness import run_main
from tests.cli.test_fuzz import assert_no_traceback

PATH_TAGS = ["{outside}/base_checkpoints/d2", "../../x/base_checkpoints/d2", "d2/../d2", ".hidden", "d2/"]


def _commands(tag: str, base: str, results: str) -> list[list[str]]:
    where = ["--base-dir", base]
    return [
        ["eval", "--tag", tag, *where, "--results-dir", results],
        ["sample", "--tag", tag, *where],
        ["export", "--tag", tag, "--out", f"{results}/exp", *where],
        ["memory", "--tag", tag, *where],
        ["rope", "inspect", "--tag", tag, *where],
        ["rope", "inspect", "--base-tag", tag, "--from-step", "1", *where],
        ["ls", "--experiment", tag, *where, "--results-dir", results],
        ["eval", "--tag", "d2", "--base-tag", tag, *where, "--results-dir", results],
        ["continue", "--base-tag", tag, *where, "--results-dir", results, "--dry-run"],
        ["continue", "--experiment", tag, *where, "--results-dir", results, "--dry-run"],
        ["status", "--experiment", tag, *where, "--results-dir", results],
        ["report", "--experiment", tag, "--results-dir", results],
        ["power", "--experiment", tag, "--results-dir", results],
    ]


@pytest.mark.parametrize("pattern", PATH_TAGS)
def test_every_tag_or_experiment_argument_is_a_name_never_a_path(tmp_path, pattern):
    outside = tmp_path / "outside"
    (outside / "base_checkpoints" / "d2").mkdir(parents=True)
    (outside / "base_checkpoints" / "d2" / "meta_000001.json").write_text("{}")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    tag = pattern.format(outside=outside)
    for argv in _commands(tag, str(tmp_path / "base"), str(tmp_path / "results")):
        done = run_main(*argv, cwd=tmp_path)
        assert_no_traceback(done)
        assert done.code == 2, (argv, done.code, done.err[-600:])
        assert "not a path" in done.err and "must start with a letter or digit" in done.err, (argv, done.err)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written anywhere


def test_compare_and_the_layouts_refuse_a_path_where_a_name_belongs(tmp_path):
    with pytest.raises(SpecError, match="not a path"):
        BaseLayout(tmp_path).checkpoint_dir("../elsewhere")
    with pytest.raises(SpecError, match="not a path"):
        ExperimentLayout(tmp_path, "/abs/exp")
    with pytest.raises(SpecError, match="not a path"):
        ExperimentLayout(tmp_path, "exp").eval_dir("a/../b")
    done = run_main("compare", "ok", "../other", "--results-dir", str(tmp_path))
    assert_no_traceback(done)
    assert done.code != 0 and "not a path" in done.err, done.err
