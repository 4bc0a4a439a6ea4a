"""The report's Answer: one row per arm, the verdicts typed, the same table in markdown, HTML, the terminal and JSON."""

from __future__ import annotations

import json

import pytest

from rlab.report.build import write_report
from rlab.report.render import answer as ans
from rlab.report.render import html_page
from rlab.report.render import markdown as md
from rlab.report.render import methods as mth
from rlab.report.stats.verdicts import Verdict
from tests.cli.harness import run_main


def test_the_report_opens_with_one_row_per_arm(fx):

    out = write_report(fx, fmt="html", draws=200)
    answer = out.answer_table
    assert answer is not None
    assert [r.arm for r in answer.rows] == [
        "rope",
        "pi",
        "ntk",
        "yarn",
    ]  # the control first, then the spec's order
    assert answer.groups == {0: "continued at 128, vs rope"}
    pi = answer.rows[1]
    level = out.data.comparisons.set_index(["arm", "metric"]).loc[("pi", "primary_bpb")]  # BPB at 4T, primary
    assert pi.primary is not None and pi.primary.verdict == level["verdict"]
    assert pi.primary.low is not None and pi.primary.low < pi.primary.value < pi.primary.high
    assert pi.core is not None and pi.core.verdict == Verdict.TOO_FEW_UNITS.value and pi.core.n_units == 16
    assert [c.key for c in answer.columns] == [
        "primary",
        "at_target",
        "extension",
        "core",
    ]  # no copy, no base
    md = fx.comparison_md.read_text()
    opening = md.split("\n## ")[0]
    assert opening.splitlines()[2:4] == [
        "<!-- answer -->",
        f"**Answer**{ans.title(out.data).removeprefix('Answer')}:",
    ]
    assert "| arm | [primary Δ vs rope](#methods) | [BPB@128 vs rope](#methods) |" in opening
    pi_row = next(line for line in opening.splitlines() if line.startswith("| pi | "))
    assert pi_row.startswith(f"| pi | {level['diff']:+.4f}")
    assert (
        "families primary 2, secondary " in opening
        and "comparisons, Holm within each, familywise error 5%" in opening
    )
    assert (
        "## Methods" in md and "Holm, familywise error" not in md
    )  # each family said once, not per sentence
    html = fx.comparison_html.read_text()
    assert '<th><a href="#methods">primary Δ vs rope</a></th>' in html and 'id="methods"' in html
    assert '<div class="with-figure"><div class="answer">' in html and '<figure class="beside">' in html


def test_a_cell_shows_its_verdict_as_a_badge_and_its_mde():
    col = ans.Column("at_target", "BPB@128 vs rope", "", 2)
    cell = ans.cell(ans.Estimate(0.05, -0.06, 0.16, "%", Verdict.WITHIN_NOISE.value, 0.22, 52), col)
    assert md._md_cell(cell) == "+0.05% ± 0.11 **within noise** (MDE 0.22%)"
    html = html_page._html_cell(cell)
    assert '<span class="badge noise" title="within noise">≈ noise</span> <small>MDE 0.22%</small>' in html
    holm = ans.cell(
        ans.Estimate(0.71, 0.10, 1.32, "%", Verdict.WITHIN_NOISE.value, 0.9, 52, holm_only=True), col
    )
    assert md._md_cell(holm) == "+0.71% ± 0.61 **within noise** (after Holm; MDE 0.90%)"
    seeds = ans.Estimate(0.71, -0.6, 2.02, "%", Verdict.WITHIN_NOISE.value, 416.0, 52, seed_limited=True)
    assert md._md_cell(ans.cell(seeds, col)) == "+0.71% ± 1.31 **within noise** (seed MDE 416.00%)"
    asymmetric = ans.cell(
        ans.Estimate(0.5, 0.1, 0.6, ""), ans.Column("copy_retention", "", "", 2, signed=False)
    )
    assert asymmetric.text == "0.50 [0.10, 0.60]" and not asymmetric.badge


def test_captions_name_the_methods_the_code_uses(fx):
    """No caption says "bootstrap" where the interval is studentized t: captions take their words from methods."""

    write_report(fx, draws=200)
    md = fx.comparison_md.read_text()
    captions = [line for line in md.splitlines() if line.startswith("_") and "interval" in line]
    assert captions and not [c for c in captions if "bootstrap" in c and "length [" not in c]
    assert sum(mth.INTERVAL in c for c in captions) >= 2


def test_the_terminal_and_json_carry_the_same_table(results_root):
    shown = run_main(
        "report", "--results-dir", str(results_root), "-e", "fx", "--bootstrap", "200", columns=160
    )
    assert shown.code == 0, shown.text
    first = shown.out.split("\n\n")[0]
    assert first.startswith("Answer (primary endpoint") and "primary Δ vs rope" in first
    assert "primary Δ vs rope" in first and "continued at 128" in first
    outcome = run_main(
        "report", "--results-dir", str(results_root), "-e", "fx", "--bootstrap", "200", "--json"
    )
    table = json.loads(outcome.out)["answer_table"]
    assert [c["key"] for c in table["columns"]] == ["primary", "at_target", "extension", "core"]
    pi = next(r for r in table["rows"] if r["arm"] == "pi")
    assert (
        pi["primary"]["value"] == pytest.approx(1.60 - 2.60, abs=5e-5)  # BPB at 4T = 512, pi minus rope
        and pi["primary"]["verdict"] == "better"
        and pi["kind"] == "continued"
    )
    assert table["lines"][0].startswith("Verdicts: families primary 2")
