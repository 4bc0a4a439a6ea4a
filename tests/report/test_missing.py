"""Missing pieces become blanks plus a footnote, never a crash."""

from __future__ import annotations

import math
import shutil

import pandas as pd
import pytest

from rlab.errors import RlabError
from rlab.paths import ExperimentLayout
from rlab.report.assemble.collect import collect
from rlab.report.build import write_report
from rlab.report.sources.tag_files import read_run
from tests.report.conftest import write_run


def test_tag_not_evaluated_is_blank_with_footnote(fx):
    shutil.rmtree(fx.eval_dir("fx-yarn"))
    out = write_report(fx, draws=200)
    row = out.data.results.set_index("tag").loc["fx-yarn"]
    assert (
        math.isnan(row["val_bpb"]) and math.isnan(row["bpb_len_512"]) and row["val_bpb_verdict_vs_rope"] == ""
    )
    assert row["notes"] == "fx-yarn: not evaluated yet (no eval.json)"
    md = fx.comparison_md.read_text()
    mark = out.data.footnotes.items.index("fx-yarn: not evaluated yet (no eval.json)") + 1
    assert f"| yarn [{mark}] |  |  |" in md
    assert f"{mark}. fx-yarn: not evaluated yet (no eval.json)" in md
    csv = pd.read_csv(fx.results_csv, keep_default_na=False)
    assert csv.set_index("tag").loc["fx-yarn", "val_bpb"] == ""


def test_missing_metrics_file_and_unreadable_eval_json(fx):
    shutil.rmtree(fx.run_dir("fx-pi"))
    fx.eval_json("fx-yarn").write_text('{"schema": "rlab.eval/1", "metr')  # torn write
    data = collect(fx, "rope", draws=200)
    res = data.results.set_index("tag")
    assert math.isnan(res.loc["fx-pi", "last_train_loss"]) and res.loc["fx-pi", "val_bpb"] == pytest.approx(
        1.48
    )
    assert "fx-pi: no training metrics (metrics.jsonl)" in data.footnotes.items
    assert any(
        n.startswith("left out: fx-yarn, eval.json unreadable:") and "not readable JSON" in n
        for n in data.footnotes.items
    )
    assert "fx-yarn" not in res.index  # left out, and named so, never silently dropped
    assert set(data.curves["tag"]) == {"fx-ntk", "fx-rope"}


def test_no_units_means_no_claims(fx):
    for tag in ("fx-rope", "fx-pi", "fx-yarn"):
        (fx.eval_dir(tag) / "bpb_units.csv").unlink()
        (fx.eval_dir(tag) / "core_examples.csv").unlink()
    data = collect(fx, "rope", draws=200)
    res = data.results.set_index("tag")
    assert res.loc["fx-yarn", "val_bpb"] == 1.455
    # eval.json's intervals are null here: no interval, so no verdict either way
    assert res.loc["fx-yarn", "val_bpb_verdict_vs_rope"] == ""
    assert res.loc["fx-yarn", "core_verdict_vs_rope"] == ""


def test_missing_baseline_is_a_footnote(fx):
    data = collect(fx, "llama3", draws=200)
    assert "baseline variant 'llama3' has no outputs: no comparisons" in data.footnotes.items
    assert not any("_vs_" in c for c in data.results.columns)


def test_runs_only_experiment_and_empty_experiment(results_root):
    layout = ExperimentLayout(results_root, "fx")
    shutil.rmtree(layout.root / "evals")
    for csv in layout.root.glob("results_*.csv"):
        csv.unlink()
    out = write_report(layout, fmt="html", draws=200)
    assert out.data.results["val_bpb"].isna().all() if "val_bpb" in out.data.results else True
    assert layout.comparison_md.is_file() and (layout.plots_dir / "loss_curves.png").is_file()
    assert not (layout.plots_dir / "bpb_vs_length.png").exists()
    assert (
        "plot bpb_vs_length.png not drawn: no informative data for it yet" in layout.comparison_md.read_text()
    )

    with pytest.raises(RlabError, match="no runs or evals"):
        (results_root / "empty").mkdir()
        write_report(ExperimentLayout(results_root, "empty"))
    with pytest.raises(RlabError, match="No results for experiment 'nope'"):
        write_report(ExperimentLayout(results_root, "nope"))


def test_base_pretrain_run_is_not_a_variant(fx):
    """`rlab pretrain` writes runs/<base tag>/ (variant rope): it must not become a second baseline."""

    write_run(fx, "fx", "rope", scratch=True)
    shutil.copy(fx.metrics_file("fx-rope"), fx.metrics_file("fx"))
    data = collect(fx, "rope", draws=200)
    assert "fx" not in set(data.results["tag"]) and data.baseline_tag == "fx-rope"
    assert "fx: the base model's own run, not a variant; left out of the comparison" in data.footnotes.items


def test_an_off_contract_run_json_is_a_footnote_not_a_guess(tmp_path):
    """run.json is read through `RunConfig`, the model that writes it: a partial file is not half-read."""
    path = tmp_path / "run.json"
    path.write_text('{"tag": "fx-pi", "train": {"seed": 1}}')
    notes: list[str] = []
    assert read_run(path, notes) is None
    assert notes == ["run.json ignored: it does not match its contract (RunConfig)"]
