"""`rlab report` from the command line: CliRunner for flags and errors, one real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
from typer.testing import CliRunner

from rlab.cli.app import app

runner = CliRunner()


def test_cli_writes_everything_and_shows_tables(results_root):
    result = runner.invoke(
        app,
        [
            "report",
            "--results-dir",
            str(results_root),
            "--experiment",
            "fx",
            "--format",
            "html",
            "--bootstrap",
            "200",
        ],
    )
    assert result.exit_code == 0, result.output
    exp = results_root / "fx"
    for name in ("results.csv", "comparison.md", "comparison.html", "plots/bpb_vs_length.png"):
        assert (exp / name).is_file(), name
    assert result.output.startswith("pi vs rope: ")  # the answer comes first
    assert "BPB change vs rope by context length" in result.output and "Passkey" in result.output
    assert "not evaluated yet" in result.output  # the footnotes are shown too
    html = (exp / "comparison.html").read_text()
    assert "<table>" in html and 'class="best"' in html and '<strong class="better">better</strong>' in html
    assert 'src="data:image/png;base64,' in html and 'src="plots/' not in html  # self-contained


def test_cli_picks_the_only_experiment_and_baseline_flag(results_root, monkeypatch):
    monkeypatch.setenv("RLAB_RESULTS_DIR", str(results_root))
    result = runner.invoke(app, ["report", "--format", "csv", "--baseline", "pi", "-q", "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(results_root / "fx" / "results.csv")
    assert "val_bpb_rel_vs_pi_pct (neg=better)" in frame.columns
    assert not (results_root / "fx" / "comparison.md").exists()  # csv: results.csv only


def test_cli_errors_are_one_line_messages(results_root, tmp_path):
    (results_root / "other" / "evals").mkdir(parents=True)
    r = subprocess.run(
        [sys.executable, "-m", "rlab", "report", "--results-dir", str(results_root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "Several experiments" in r.stderr and "fx, other" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlab",
            "report",
            "--results-dir",
            str(results_root),
            "-e",
            "fx",
            "--format",
            "pdf",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        r.returncode == 2
        and "'pdf' is not one of 'md', 'html', 'csv'" in r.stderr
        and "Traceback" not in r.stderr
    )


def test_subprocess_report_is_deterministic(results_root):
    """A separate process writes the same bytes as this one (no hash-seed or ordering dependence)."""
    args = ["report", "--results-dir", str(results_root), "-e", "fx", "-q", "--bootstrap", "200"]
    first = subprocess.run([sys.executable, "-m", "rlab", *args], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "results.csv" in first.stdout
    csv1 = (results_root / "fx" / "results.csv").read_bytes()
    md1 = (results_root / "fx" / "comparison.md").read_bytes()
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert (results_root / "fx" / "results.csv").read_bytes() == csv1
    assert (results_root / "fx" / "comparison.md").read_bytes() == md1


def test_cli_takes_the_experiment_from_a_spec(results_root, tmp_path):
    spec = tmp_path / "fx.yaml"
    spec.write_text(f"name: fx\nresults_dir: {results_root}\nbase:\n  tag: fx\n")
    result = runner.invoke(
        app, ["report", "--spec", str(spec), "--format", "csv", "-q", "--bootstrap", "200"]
    )
    assert result.exit_code == 0, result.output
    assert (results_root / "fx" / "results.csv").is_file()
    missing = runner.invoke(app, ["report", "--spec", str(tmp_path / "nope.yaml")])
    assert missing.exit_code != 0


def test_unknown_baseline_is_an_error_with_a_suggestion(results_root):
    """A typo in --baseline fails before anything is written; a case slip is forgiven."""
    from tests.cli.inproc import assert_clean_error, run_main

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
    import shutil

    from tests.cli.inproc import assert_clean_error, run_main

    shutil.rmtree(results_root / "fx" / "evals")
    outcome = run_main("report", "--results-dir", str(results_root), "-e", "fx")
    assert_clean_error(outcome, "Experiment 'fx' has no evals yet", "rlab eval --all -e fx")
    assert not (results_root / "fx" / "results.csv").exists()
