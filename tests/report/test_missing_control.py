"""A report whose control arm (continued rope) is missing gives the continued arms no verdict, and names the command
that trains the control, instead of comparing them with a training-free arm or the base (issue 36)."""

from __future__ import annotations

import shutil

from rlab.paths import ExperimentLayout
from rlab.report.assemble.collect import collect
from rlab.report.render import answer
from rlab.report.render import document as doc
from tests.conftest import REPO_ROOT


def test_no_continued_rope_no_verdicts_and_the_command_that_adds_it(tmp_path):
    shutil.copytree(REPO_ROOT / "results" / "demo", tmp_path / "demo")
    for folder in ("evals", "runs"):
        for tag in ("demo-rope", "demo-rope-seed1"):
            shutil.rmtree(tmp_path / "demo" / folder / tag, ignore_errors=True)
    data = collect(ExperimentLayout(tmp_path, "demo"), draws=20)
    continued = data.comparisons[data.comparisons["kind"] == "continued"]
    assert continued.empty  # no "vs rope (zero-shot)" or "vs base" verdicts for trained arms
    assert not data.comparisons[data.comparisons["kind"] == "zero-shot"].empty  # zero-shot vs zero-shot stays
    (note,) = [n for n in data.footnotes.items if "the control" in n]
    assert f"rlab continue --spec {tmp_path / 'demo' / 'spec.resolved.yaml'} --variants rope" in note


def test_unevaluated_zero_shot_arms_are_not_labelled_control(tmp_path):
    """Before the zero-shot arms are evaluated (a chain stopped after `continue`), only the baseline's zero-shot arm
    is the block's control: the others are plain rows, not one "(control)" each."""
    shutil.copytree(REPO_ROOT / "results" / "demo", tmp_path / "demo")
    for tag in (tmp_path / "demo" / "evals").glob("demo-*-zeroshot"):
        shutil.rmtree(tag)
    data = collect(ExperimentLayout(tmp_path, "demo"), draws=20)
    assert data.comparisons[data.comparisons["kind"] == "zero-shot"].empty
    built = answer.build(data, [], [])
    labels = [row[0].text for row in answer.table(built).rows]
    zero_shot = [label for r, label in zip(built.rows, labels, strict=True) if r.kind == "zero-shot"]
    assert zero_shot[0] == "rope (control)" and not any("(control)" in label for label in zero_shot[1:])
    (waiting,) = [line for line in built.lines if "Not evaluated yet" in doc.plain(line)]
    assert "5 of 16 tags" in doc.plain(waiting) and "demo-pi-zeroshot" in doc.plain(waiting)
    assert f"rlab eval --spec {tmp_path / 'demo' / 'spec.resolved.yaml'} --all" in doc.plain(waiting)
