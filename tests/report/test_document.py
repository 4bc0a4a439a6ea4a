"""The document model: one build, two renderings; verdicts typed end to end; the committed demo unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlab.paths import ExperimentLayout
from rlab.report.build import write_report
from rlab.report.render import document as doc
from rlab.report.render import html_page
from rlab.report.render import markdown as md
from rlab.report.stats.verdicts import Verdict

REPO = Path(__file__).resolve().parents[2]


def test_a_verdict_is_styled_by_its_enum_not_by_its_words():
    line = doc.text(doc.strong("pi"), " vs rope: ", doc.verdict(Verdict.WORSE, "clearly so"), " (n = 32).")
    assert md.md_text(line) == "**pi** vs rope: **clearly so** (n = 32)."
    assert '<strong class="worse">clearly so</strong>' in html_page.html_text(line)
    cell = doc.Cell("+1.00% [+0.5, +1.5] (≈; MDE 0.4%) (capped at 1024)", Verdict.WITHIN_NOISE)
    table = doc.TableBlock(
        ["arm", "128"], [[doc.Cell("yarn"), cell], [doc.Cell("ntk"), doc.Cell("1.2", best=True)]]
    )
    html = html_page.html_table(table)
    assert '<td class="noise">+1.00%' in html and '<td class="best">1.2</td>' in html
    assert md.md_table(table)[1:] == [
        "|:---|---:|",
        "| yarn | +1.00% [+0.5, +1.5] (≈; MDE 0.4%) (capped at 1024) |",
        "| ntk | **1.2** |",
    ]


def test_prose_reads_code_spans_only():
    assert doc.prose("compare with `rope` (**not bold**)") == (
        doc.Span("compare with "),
        doc.Span("rope", code=True),
        doc.Span(" (**not bold**)"),
    )
    assert doc.prose("one ` backtick") == (doc.Span("one ` backtick"),)
    assert md.md_text(doc.prose("a `b` c")) == "a `b` c"


def test_one_document_two_renderings(tmp_path):
    png = tmp_path / "p.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    document = doc.Document(
        doc.text("Experiment ", doc.code("x")),
        [
            doc.Marked(
                "answer",
                [
                    doc.Bullets(
                        [
                            doc.Item(doc.text("a ", doc.verdict(Verdict.BETTER))),
                            doc.Item(doc.text("Warning: w"), "warning"),
                        ],
                        "answer",
                    )
                ],
            ),
            doc.Image(png, "plots/p.png", "a plot"),
            doc.Section("Notes", [doc.Numbered(["first"])]),
        ],
        html_title="t",
    )
    assert md.to_markdown(document) == (
        "# Experiment `x`\n\n<!-- answer -->\n- a **better**\n- Warning: w\n<!-- /answer -->\n\n![a plot](plots/p.png)\n\n## Notes\n\n1. first\n"
    )
    html = html_page.to_html(document)
    assert '<div class="answer">\n<ul class="answer">' in html
    assert '<li class="warning">Warning: w</li>' in html and '<strong class="better">better</strong>' in html
    assert 'src="data:image/png;base64,' in html and "plots/p.png" not in html  # self-contained
    assert '<a href="#notes">Notes</a>' in html


def test_report_cells_carry_their_verdicts(fx):

    out = write_report(fx, fmt="html", draws=200)
    assert out.document is not None
    tables = [
        b
        for s in out.document.blocks
        if isinstance(s, doc.Section)
        for b in s.blocks
        if isinstance(b, doc.TableBlock)
    ]
    verdicts = {c.verdict for t in tables for row in t.rows for c in row if c.verdict is not None}
    assert {Verdict.WITHIN_NOISE, Verdict.TOO_FEW_UNITS} <= verdicts
    firsts = [
        next(s for s in i.text if s.verdict is not None) for i in out.items if any(s.verdict for s in i.text)
    ]
    assert {s.verdict for s in firsts} == {Verdict.BETTER}  # fx: pi and yarn better on the primary endpoint
    assert md.to_markdown(out.document) == fx.comparison_md.read_text()
    html = fx.comparison_html.read_text()
    assert html.count('<span class="badge better">better</span>') == 2  # the Answer's badges, typed
    assert html.count('<td class="few">') == 2  # CORE on 16 examples: too few units, typed, not parsed


@pytest.mark.slow
def test_the_committed_demo_report_renders_byte_for_byte(tmp_path):
    """Re-rendering results/demo's committed evals with today's code gives the committed comparison.md."""

    shutil.copytree(REPO / "results" / "demo", tmp_path / "demo")
    layout = ExperimentLayout(tmp_path, "demo")
    write_report(layout, fmt="html")
    assert layout.comparison_md.read_text() == (REPO / "results" / "demo" / "comparison.md").read_text()
    assert (REPO / "results" / "demo" / "comparison.html").is_file()
