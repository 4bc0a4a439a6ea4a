"""Two results.csv compared verdict by verdict (arm x column): what a rerun reproduced, and `rlab compare` says it."""

from __future__ import annotations

import csv

import pytest

from rlab.paths import ExperimentLayout
from rlab.records.base import ContractError
from rlab.report.assemble.compare import _verdict_notes
from rlab.report.assemble.verdict_diff import verdict_diff
from rlab.report.stats.verdicts import Verdict

COLUMNS = [
    "experiment",
    "tag",
    "variant",
    "arm",
    "bpb_len_2048",
    "bpb_len_2048_verdict_vs_rope",
    "core_verdict_vs_rope",
]


def _results(root, experiment, rows):
    """results.csv of `experiment` under `root`: rows of (tag, arm, bpb verdict, core verdict)."""
    path = ExperimentLayout(root, experiment).results_csv
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for tag, arm, bpb, core in rows:
            writer.writerow([experiment, tag, arm.split(" ")[0], arm, "1.5", bpb, core])
    return path


DEMO = [
    ("demo-pi", "pi", "better", "≈ within noise"),
    ("demo-pi-seed1", "pi", "better", "≈ within noise"),  # a seed repeats its arm's verdicts: counted once
    ("demo-ntk", "ntk", "≈ within noise", "worse"),
    ("demo-rope", "rope", "", ""),  # the baseline has no verdict vs itself
]


def test_changes_are_counted_per_arm_and_column_those_to_or_from_a_direction_apart(tmp_path):
    a = _results(tmp_path, "demo", DEMO)
    b = _results(
        tmp_path,
        "rerun",
        [
            ("x-pi", "pi", "≈ within noise", "≈ within noise"),
            ("x-pi-seed1", "pi", "≈ within noise", "≈ within noise"),
            ("x-ntk", "ntk", "≈ within noise", "too few units"),
            ("x-yarn", "yarn", "worse", ""),  # an arm the first lacks
        ],
    )
    diff = verdict_diff(a, b)
    assert diff.compared == 4 and diff.only_one == 1 and len(diff.changes) == 2
    assert [c.sentence() for c in diff.directional] == [
        "ntk core vs rope: worse -> too few units",
        "pi bpb_len_2048 vs rope: better -> ≈ within noise",
    ]
    assert diff.summary() == "2 of 4 verdicts changed, 2 of them to or from better/worse (1 in one file only)"
    assert verdict_diff(a, a).changes == ()


def test_a_cell_that_is_no_verdict_breaks_the_contract(tmp_path):
    a = _results(tmp_path, "demo", [("demo-pi", "pi", "much better", "")])
    with pytest.raises(ContractError, match="much better"):
        verdict_diff(a, a)
    with pytest.raises(ContractError, match="Cannot read"):
        verdict_diff(tmp_path / "none.csv", a)
    assert Verdict("≈ within noise") is Verdict.WITHIN_NOISE


def test_compare_says_how_the_experiments_own_verdicts_differ(tmp_path):
    _results(tmp_path, "demo", DEMO)
    _results(
        tmp_path,
        "rerun",
        [(t.replace("demo", "x"), arm, "worse" if arm == "pi" else b, c) for t, arm, b, c in DEMO],
    )
    layouts = [ExperimentLayout(tmp_path, n) for n in ("demo", "rerun", "missing")]
    assert _verdict_notes(layouts) == [
        "demo's and rerun's own reports: 1 of 4 verdicts changed, 1 of them to or from better/worse "
        "(pi bpb_len_2048 vs rope: better -> worse)."
    ]  # an experiment without results.csv says nothing
