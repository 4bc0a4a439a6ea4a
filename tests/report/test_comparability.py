"""Tags evaluated (or trained) differently are shown as a mismatch and get no better/worse verdict."""

from __future__ import annotations

import json

import pandas as pd

from rlab.records.eval_doc import read_eval_doc
from rlab.report.assemble.collect import collect
from rlab.report.assemble.pairing import NOT_COMPARABLE
from rlab.report.render import tables
from rlab.report.render.table_model import BLANK
from rlab.report.sources.comparability import TRAINING, Mismatch, blocks, metric_section, mismatches
from tests.cli.harness import run_main


def _edit_eval(fx, tag: str, edit) -> None:
    path = fx.eval_json(tag)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _other_bpb_settings(doc: dict) -> None:
    run = doc["measured"]["bpb"]
    run["settings"]["bpb_tokens"] = 999
    run["settings_hash"] = "000000000000"


def test_mismatches_name_the_section_and_what_differs(fx):
    a = read_eval_doc(fx.eval_json("fx-rope"))
    assert mismatches(a, a) == []
    run = a.measured["bpb"]
    b = a.model_copy(
        update={
            "tag": "other",
            "measured": {
                **a.measured,
                "bpb": run.model_copy(
                    update={
                        "settings": {**run.settings, "bpb_tokens": 999},
                        "settings_hash": "x",
                        "data_hash": "y",
                    }
                ),
            },
            "checkpoint": a.checkpoint.model_copy(update={"tokens_trained": 1}),
        }
    )
    found = {(m.section, m.what): m for m in mismatches(b, a)}
    assert set(found) == {("bpb", "eval settings"), ("bpb", "eval data"), (TRAINING, "training budget")}
    assert "bpb_tokens: 999 vs 4096" in found[("bpb", "eval settings")].detail
    assert "tokens_trained 1 vs" in found[(TRAINING, "training budget")].detail
    assert mismatches(b, a, check_training=False) and all(
        m.section != TRAINING for m in mismatches(b, a, check_training=False)
    )


def test_report_blocks_verdicts_across_other_eval_settings(fx):
    before = collect(fx, "rope", draws=200)
    assert not before.mismatches
    pi = before.comparisons[before.comparisons["arm"] == "pi"].set_index("metric")
    assert pi.loc["val_bpb", "verdict"] != NOT_COMPARABLE
    _edit_eval(fx, "fx-pi", _other_bpb_settings)
    data = collect(fx, "rope", draws=200)
    assert [(m.tag, m.section, m.what) for m in data.mismatches] == [("fx-pi", "bpb", "eval settings")]
    pi = data.comparisons[data.comparisons["arm"] == "pi"].set_index("metric")
    assert pi.loc["val_bpb", "verdict"] == NOT_COMPARABLE and pi.loc["train_bpb", "verdict"] == NOT_COMPARABLE
    assert pi.loc["core", "verdict"] != NOT_COMPARABLE  # other sections were measured alike
    assert (
        pi.loc[["val_bpb", "train_bpb"], ["diff", "diff_low", "rel_pct", "rel_high", "p_value"]]
        .isna()
        .all()
        .all()
    )
    assert pd.notna(pi.loc["core", "diff"])  # no estimate across the mismatch, the others keep theirs
    table = tables.bpb_table(data)
    row = next(r for _, r in table.frame.iterrows() if r["arm"].split(" [")[0] == "pi")
    assert row["verdict"] == NOT_COMPARABLE and row[next(c for c in table.frame.columns if "Δ" in c)] == BLANK
    assert "val_bpb" not in data.best and "train_bpb" not in data.best  # no "best" across a mismatch
    yarn = data.comparisons[data.comparisons["arm"] == "yarn"].set_index("metric")
    assert yarn.loc["val_bpb", "verdict"] != NOT_COMPARABLE
    allowed = collect(fx, "rope", draws=200, allow_mismatch=True)
    assert allowed.allow_mismatch and allowed.mismatches
    pi = allowed.comparisons[allowed.comparisons["arm"] == "pi"].set_index("metric")
    assert pi.loc["val_bpb", "verdict"] != NOT_COMPARABLE


def test_a_training_budget_mismatch_blocks_every_metric_and_is_shown_first(fx, results_root):
    _edit_eval(fx, "fx-pi", lambda d: d["checkpoint"].update(tokens_trained=1))
    result = run_main("report", "--results-dir", str(results_root), "-e", "fx", "--bootstrap", "200")
    assert result.code == 0, result.text
    said = " ".join(result.out.split())  # the terminal wraps lines
    assert (
        "Not comparable" in said
        and "fx-pi and fx-rope differ in training budget (tokens_trained 1 vs 5120)" in said
    )
    md = (results_root / "fx" / "comparison.md").read_text()
    assert "Not comparable" in md and "fx-pi and fx-rope differ in training budget" in md
    data = collect(fx, "rope", draws=200)
    pi = data.comparisons[(data.comparisons["arm"] == "pi") & (data.comparisons["verdict"] != "")]
    assert len(pi) and (pi["verdict"] == NOT_COMPARABLE).all()
    allowed = run_main(
        "report", "--results-dir", str(results_root), "-e", "fx", "--bootstrap", "200", "--allow-mismatch"
    )
    assert allowed.code == 0 and "--allow-mismatch" in (results_root / "fx" / "comparison.md").read_text()


def test_the_primary_endpoint_belongs_to_bpb_length():
    """The primary endpoint is BPB at length: a bpb_length mismatch must block its verdict too."""

    assert metric_section("primary_bpb") == "bpb_length"
    assert blocks([cmp_mismatch("bpb_length")], "primary_bpb") and not blocks(
        [cmp_mismatch("core")], "primary_bpb"
    )


def cmp_mismatch(section: str):

    return Mismatch("a", "b", section, "eval data", "x vs y")


def test_an_eval_nobody_ran_draws_no_table(fx):
    """Tags evaluated without CORE: the report has no CORE tables (rows of arm names and blanks), the rest stays."""
    for tag in ("fx-pi", "fx-rope", "fx-yarn"):

        def drop_core(doc):
            del doc["metrics"]["core"], doc["measured"]["core"]

        _edit_eval(fx, tag, drop_core)
        (fx.eval_json(tag).parent / "core_examples.csv").unlink()
    titles = [t.title for t in tables.all_tables(collect(fx, "rope", draws=200))]
    assert titles and not [t for t in titles if "CORE" in t]
    assert any("BPB" in t for t in titles)
