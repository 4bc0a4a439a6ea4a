"""Reading the DCLM bundle: tasks, baselines, missing files, malformed lines, verification."""

from __future__ import annotations

import pytest

from rlab.errors import EvalError
from rlab.evals.core.bundle import load_bundle, load_task_data, verify_bundle
from tests.conftest import EVAL_BUNDLE_DIR, full_eval_bundle


def test_bundle_tasks_and_missing(bundle):
    labels = [t.label for t in bundle.tasks]
    assert len(labels) == 20
    assert [t.label for t in bundle.missing] == ["squad", "coqa"]
    assert bundle.partial
    copa, arc, lsat, langid = (
        bundle.task(x) for x in ("copa", "arc_easy", "agi_eval_lsat_ar", "bigbench_language_identification")
    )
    assert (copa.baseline, lsat.baseline, langid.baseline) == (50.0, 20.0, 9.1)
    assert copa.continuation_delimiter == " " and arc.continuation_delimiter == "\nAnswer: "
    assert arc.num_fewshot == 10 and arc.task_type == "multiple_choice"
    assert bundle.task("winograd").task_type == "schema"


def test_missing_task_is_reported_with_warning(bundle_copy, caplog):
    with caplog.at_level("WARNING"):
        b = load_bundle(bundle_copy)
    assert [t.label for t in b.tasks] == ["copa", "winograd"]
    assert [t.label for t in b.missing] == ["squad"]
    assert "squad" in caplog.text and "partial" in caplog.text


def test_malformed_line_names_file_and_line(bundle_copy):
    path = bundle_copy / "eval_data" / "commonsense_reasoning" / "copa.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:-5]  # cut the closing brace off line 3
    path.write_text("\n".join(lines) + "\n")
    task = load_bundle(bundle_copy).task("copa")
    with pytest.raises(EvalError, match=r"copa\.jsonl:3: malformed JSON"):
        load_task_data(task)


def test_row_without_required_field_is_an_error(bundle_copy):
    path = bundle_copy / "eval_data" / "language_understanding" / "winograd_wsc.jsonl"
    path.write_text('{"context_options": ["a", "b"], "gold": 0}\n')
    with pytest.raises(EvalError, match=r"winograd_wsc\.jsonl:1: .*continuation"):
        load_task_data(load_bundle(bundle_copy).task("winograd"))


def test_missing_bundle_dir_has_hint(tmp_path):
    with pytest.raises(EvalError) as exc:
        load_bundle(tmp_path / "nope")
    assert "rlab bundle download" in exc.value.hint


def test_task_rows_load(bundle):
    rows = load_task_data(bundle.task("copa"))
    assert len(rows) == 100 and set(rows[0]) >= {"query", "choices", "gold"}


def test_verify_against_nanochat_hashes():
    """The fixture keeps two task files whole (their blobs are nanochat's) and a prefix of the others."""
    status = {c.dataset_uri.split("/")[-1]: c.status for c in verify_bundle(EVAL_BUNDLE_DIR)}
    assert status.pop("squad.jsonl") == "missing" and status.pop("coqa.jsonl") == "missing"
    assert status.pop("copa.jsonl") == "ok" and status.pop("bigbench_repeat_copy_logic.jsonl") == "ok"
    assert set(status.values()) == {"modified"} and len(status) == 17


def test_verify_the_whole_bundle_against_nanochat_hashes():
    status = {c.dataset_uri.split("/")[-1]: c.status for c in verify_bundle(full_eval_bundle())}
    assert status["squad.jsonl"] == "missing" and status["coqa.jsonl"] == "missing"
    assert status["hellaswag.jsonl"] == "modified"  # reconstructed, see the bundle's SOURCES.md
    assert sum(s == "ok" for s in status.values()) == 18
