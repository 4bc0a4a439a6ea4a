"""A CORE on a subset of the bundle's tasks (`eval.core_tasks`) is labelled as such and never compared with
another task set."""

from __future__ import annotations

import json

from rlab.records.base import short_hash
from rlab.report.assemble.collect import collect
from rlab.report.assemble.pairing import NOT_COMPARABLE
from tests.cli.harness import run_main

TASKS = ["hellaswag_zeroshot", "lambada_openai"]


def _select(fx, tag: str, tasks: list[str]) -> None:
    """What `rlab eval --tasks` writes: the selection in the section and in its measured settings."""
    path = fx.eval_json(tag)
    doc = json.loads(path.read_text())
    doc["metrics"]["core"].update(selection=tasks, bundle_tasks=22)
    run = doc["measured"]["core"]
    run["settings"]["core_tasks"] = tasks
    run["settings_hash"] = short_hash(run["settings"])
    path.write_text(json.dumps(doc))


def test_a_subset_against_the_full_core_is_not_comparable(fx):
    _select(fx, "fx-pi", TASKS)
    data = collect(fx, "rope", draws=200)
    assert [(m.tag, m.section, m.what) for m in data.mismatches] == [("fx-pi", "core", "eval settings")]
    assert "core_tasks: ['hellaswag_zeroshot', 'lambada_openai'] vs None" in data.mismatches[0].detail
    pi = data.comparisons[data.comparisons["arm"] == "pi"].set_index("metric")
    assert pi.loc["core", "verdict"] == NOT_COMPARABLE and pi.loc["val_bpb", "verdict"] != NOT_COMPARABLE
    assert any("CORE on 2 of 22 tasks only" in note for note in data.footnotes.items)
    tasks = dict(zip(data.results["tag"], data.results["core_tasks"]))
    assert tasks == {
        "fx-pi": "hellaswag_zeroshot;lambada_openai",
        "fx-rope": "all",
        "fx-yarn": "all",
        "fx-ntk": "",
    }  # not evaluated


def test_the_same_subset_everywhere_is_compared_and_labelled_k_of_n(fx, results_root):
    for tag in ("fx-rope", "fx-pi", "fx-yarn"):
        _select(fx, tag, TASKS)
    data = collect(fx, "rope", draws=200)
    assert not [m for m in data.mismatches if m.section == "core"]
    result = run_main(
        "report", "--results-dir", str(results_root), "--experiment", "fx", "--bootstrap", "200"
    )
    assert result.code == 0, result.text
    md = (results_root / "fx" / "comparison.md").read_text()
    assert "CORE (2 of 22 tasks; centered accuracy, higher is better)" in md
    assert (
        "CORE (centered accuracy, higher is better)" not in md
    )  # the full set's label (Methods defines CORE)
    results = (results_root / "fx" / "results.csv").read_text().splitlines()
    assert "core_tasks" in results[0].split(",")
    assert sum("hellaswag_zeroshot;lambada_openai" in r for r in results[1:]) == 3
