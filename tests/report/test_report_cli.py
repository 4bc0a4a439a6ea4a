"""`rlab report` from the command line: flags and errors in-process, one run in a separate process."""

from __future__ import annotations

import json
import shutil

import pandas as pd

from tests.cli.harness import assert_clean_error, run_main, run_process


def test_cli_writes_everything_and_shows_tables(results_root):
    result = run_main(
        "report",
        "--results-dir",
        str(results_root),
        "--experiment",
        "fx",
        "--format",
        "html",
        "--bootstrap",
        "200",
    )
    assert result.code == 0, result.text
    exp = results_root / "fx"
    for name in ("results.csv", "comparison.md", "comparison.html", "plots/bpb_vs_length.png"):
        assert (exp / name).is_file(), name
    assert result.out.startswith("Answer (primary endpoint: ")  # the Answer table comes first
    assert "primary Δ vs rope" in result.out and "better" in result.out
    assert "BPB change vs rope by context length" in result.out and "Passkey" in result.out
    assert "not evaluated yet" in result.out  # the footnotes are shown too
    html = (exp / "comparison.html").read_text()
    assert "<table>" in html and 'class="best"' in html and '<span class="badge better">better</span>' in html
    assert 'src="data:image/png;base64,' in html and 'src="plots/' not in html  # self-contained


def test_cli_picks_the_only_experiment_and_baseline_flag(results_root, monkeypatch):
    monkeypatch.setenv("RLAB_RESULTS_DIR", str(results_root))
    result = run_main("report", "--format", "csv", "--baseline", "pi", "-q", "--bootstrap", "200")
    assert result.code == 0, result.text
    frame = pd.read_csv(results_root / "fx" / "results.csv")
    assert "val_bpb_rel_vs_pi_pct (neg=better)" in frame.columns
    assert not (results_root / "fx" / "comparison.md").exists()  # csv: results.csv only


def test_cli_errors_are_one_line_messages(results_root, tmp_path):
    (results_root / "other" / "evals").mkdir(parents=True)
    r = run_main("report", "--results-dir", str(results_root))
    assert r.code == 1 and r.exception is None
    assert "Several experiments" in r.err and "fx, other" in r.err and "Traceback" not in r.err
    r = run_main("report", "--results-dir", str(results_root), "-e", "fx", "--format", "pdf")
    assert (
        r.code == 2
        and r.exception is None
        and "'pdf' is not one of 'md', 'html', 'csv'" in r.err
        and "Traceback" not in r.err
    )


def test_subprocess_report_is_deterministic(results_root):
    """A separate process writes the same bytes as this one (no hash-seed or ordering dependence)."""
    args = ["report", "--results-dir", str(results_root), "-e", "fx", "-q", "--bootstrap", "200"]
    first = run_process(*args, timeout=120)
    assert first.code == 0, first.err
    assert "results.csv" in first.out
    csv1 = (results_root / "fx" / "results.csv").read_bytes()
    md1 = (results_root / "fx" / "comparison.md").read_bytes()
    second = run_main(*args)
    assert second.code == 0, second.text
    assert (results_root / "fx" / "results.csv").read_bytes() == csv1
    assert (results_root / "fx" / "comparison.md").read_bytes() == md1


def test_cli_takes_the_experiment_from_a_spec(results_root, tmp_path):
    spec = tmp_path / "fx.yaml"
    spec.write_text(f"name: fx\nresults_dir: {results_root}\nbase:\n  tag: fx\n")
    result = run_main("report", "--spec", str(spec), "--format", "csv", "-q", "--bootstrap", "200")
    assert result.code == 0, result.text
    assert (results_root / "fx" / "results.csv").is_file()
    missing = run_main("report", "--spec", str(tmp_path / "nope.yaml"))
    assert_clean_error(missing, f"Spec file not found: {tmp_path / 'nope.yaml'}")


def test_unknown_baseline_is_an_error_with_a_suggestion(results_root):
    """A typo in --baseline fails before anything is written; a case slip is forgiven."""
    md = results_root / "fx" / "comparison.md"
    outcome = run_main("report", "--results-dir", str(results_root), "-e", "fx", "--baseline", "yarm")
    assert_clean_error(outcome, "Unknown baseline variant 'yarm'. Did you mean 'yarn'?", "--baseline")
    assert not md.exists()
    outcome = run_main(
        "report",
        "--results-dir",
        str(results_root),
        "-e",
        "fx",
        "--baseline",
        "PI",
        "--format",
        "csv",
        "--bootstrap",
        "100",
        "--json",
    )
    assert outcome.code == 0, outcome.text
    doc = json.loads(outcome.out)
    assert doc["baseline"] == "pi" and doc["experiment"] == "fx"
    assert any(p.endswith("results.csv") for p in doc["written"]) and doc["tables"]
    assert (
        doc["mismatches"] == [] and doc["allow_mismatch"] is False
    )  # the fixture's tags were evaluated alike


def test_report_before_any_eval_is_an_error(results_root):
    shutil.rmtree(results_root / "fx" / "evals")
    outcome = run_main("report", "--results-dir", str(results_root), "-e", "fx")
    assert_clean_error(outcome, "Experiment 'fx' has no evals yet", "rlab eval --all -e fx")
    assert not (results_root / "fx" / "results.csv").exists()
