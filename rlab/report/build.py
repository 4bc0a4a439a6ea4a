"""`write_report`: collect an experiment's outputs and write results.csv, comparison.md/.html and plots.

The one entry point the CLI calls. `report_document` builds the report once as a `rlab.report.render.document.Document`
(the answer: one sentence per variant on the primary endpoint, then what limits it; the headline plot; the method;
the copy section; tables that each say what they measure; plots; notes), and the markdown and the HTML are two
renderings of it (the HTML self-contained: plots embedded as base64 PNGs). It returns what it built and leaves
terminal rendering to the CLI.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rlab.atomic_io import write_text_atomic
from rlab.errors import RlabError
from rlab.paths import ExperimentLayout
from rlab.report.assemble.collect import collect
from rlab.report.assemble.report_data import ReportData
from rlab.report.assemble.results_csv import lock_for, write_results_csv
from rlab.report.copy_distance import section as copy_distance
from rlab.report.estimands import section as estimands_section
from rlab.report.render import answer as ans
from rlab.report.render import document as doc
from rlab.report.render import headline, html_page
from rlab.report.render import markdown as md
from rlab.report.render import methods as mth
from rlab.report.render.answer_lines import declared_families
from rlab.report.render.plots import PLOT_FILES, write_plots
from rlab.report.render.table_model import Table
from rlab.report.render.tables import all_tables, main_tables, passkey_all_zero, section
from rlab.report.stats import uncertainty as unc

log = logging.getLogger(__name__)

ReportFormat = Literal["md", "csv", "html"]
FORMATS: tuple[str, ...] = ("md", "csv", "html")
_PLOT_CAPTIONS = {
    "bpb_length": "Paired BPB difference vs the baseline by context length (headline)",
    "loss": "Training loss relative to the baseline",
    "val_bpb": "In-training val BPB relative to the baseline",
    "passkey": "Passkey accuracy by length and depth",
}


@dataclass
class ReportOutput:
    data: ReportData
    tables: list[Table]
    """The main tables (for the terminal)."""
    items: list[doc.Item] = field(default_factory=list)
    """The verdicts in words: one sentence per variant, the copy's lines, then warnings and notes (JSON)."""
    written: list[Path] = field(default_factory=list)
    document: doc.Document | None = None
    answer_table: ans.Answer | None = None
    """The Answer: one row per arm, three lines (the document's, the terminal's and JSON's first table)."""

    @property
    def answer(self) -> list[str]:
        """The opening lines as markdown (JSON, tests)."""
        return [md.md_text(i.text) for i in self.items]


def limits(data: ReportData, copy: copy_distance.CopySection | None = None) -> list[str]:
    """What limits the verdicts: the report's warnings, and whether the models use context at all."""
    out = list(headline.warnings(data))
    if copy is not None and copy.caveat:
        out.append(copy.caveat)
    if (line := _passkey_line(data)) is not None:
        out.append(line)
    return out


def answer_of(data: ReportData, copy: copy_distance.CopySection | None = None) -> ans.Answer:
    return ans.build(data, limits(data, copy), headline.disagreements(data))


def answer_items(data: ReportData, copy: copy_distance.CopySection | None = None) -> list[doc.Item]:
    """Verdicts in words, then what limits them (`limits`) and notes."""
    return (
        [doc.Item(t) for t in headline.sentences(data)]
        + [doc.Item(t) for t in (copy.answer if copy is not None else [])]
        + [doc.Item(doc.prose(f"Warning: {w}"), "warning") for w in limits(data, copy)]
        + [doc.Item(doc.prose(f"Note: {n}"), "note") for n in headline.disagreements(data)]
    )


def answer_lines(data: ReportData, copy: copy_distance.CopySection | None = None) -> list[str]:
    """`answer_items` as markdown lines."""
    return [md.md_text(i.text) for i in answer_items(data, copy)]


def _passkey_line(data: ReportData) -> str | None:
    if not passkey_all_zero(data):
        return None
    n = int(data.passkey["n"].sum() / max(1, data.passkey["tag"].nunique()))
    lengths = ", ".join(str(L) for L in sorted(set(data.passkey["length"].astype(int))))
    return (
        f"Passkey retrieval: accuracy 0 for every arm at every length ({lengths}) and depth "
        f"({n} keys per tag): no model here retrieves; no table or plot is drawn."
    )


def _plot(plots: dict[str, Path | None], key: str, heading: bool = False) -> doc.Image | None:
    path = plots.get(key)
    if path is None:
        return None
    caption = _PLOT_CAPTIONS[key]
    return doc.Image(path, f"plots/{PLOT_FILES[key]}", caption, caption if heading else None)


def report_document(
    data: ReportData,
    tables: list[Table],
    plots: dict[str, Path | None],
    seed: int,
    draws: int,
    copy: copy_distance.CopySection | None = None,
) -> doc.Document:
    """The report as one document (rendered to comparison.md and comparison.html): the Answer (its table, three
    lines, the headline plot beside it), the warnings, the copy section and tables, plots, Methods, notes."""
    answer = answer_of(data, copy)
    opening: list[doc.Block] = [
        doc.Paragraph(doc.text(doc.strong("Answer"), ans.title(data).removeprefix("Answer") + ":")),
        ans.table(answer),
        *(doc.Paragraph(line) for line in answer.lines),
    ]
    blocks: list[doc.Block] = [doc.Marked("answer", opening, beside=_plot(plots, "bpb_length"))]
    if answer.warnings:
        blocks.append(doc.Section("Warnings and notes", [doc.Bullets(answer.warnings)]))
    if copy is not None:
        blocks.append(copy_distance.section(copy))
    blocks += estimands_section.sections(data)
    blocks += [section(t) for t in tables]
    figures = [f for k in ("loss", "val_bpb", "passkey") if (f := _plot(plots, k, heading=True)) is not None]
    if figures:
        blocks.append(doc.Section("Plots", list(figures)))
    blocks.append(
        mth.section(
            clustered=data.clustered,
            seed=seed,
            draws=draws,
            families=declared_families(data),
            baseline=data.baseline,
            bases_note=headline.bases_note(data),
            columns=[(c.header, c.definition) for c in answer.columns],
        )
    )
    if data.footnotes.items:
        blocks.append(doc.Section("Notes", [doc.Numbered(list(data.footnotes.items))]))
    return doc.Document(
        doc.text("Experiment ", doc.code(data.experiment), ": RoPE variants vs ", doc.code(data.baseline)),
        blocks,
        html_title=f"rlab report: {data.experiment}",
    )


def write_report(
    layout: ExperimentLayout,
    *,
    baseline: str | None = None,
    fmt: str = "md",
    seed: int = 0,
    draws: int = unc.DEFAULT_DRAWS,
    allow_mismatch: bool = False,
) -> ReportOutput:
    """Build the report of one experiment into its results folder.

    Always writes results.csv; ``md`` adds comparison.md and the plots; ``html`` adds comparison.html
    as well; ``csv`` writes results.csv only.
    """
    if fmt not in FORMATS:
        raise RlabError(f"Unknown report format '{fmt}'.", f"Use one of: {', '.join(FORMATS)}.")
    if not layout.root.is_dir():
        raise RlabError(
            f"No results for experiment '{layout.experiment}' under {layout.results_root}.",
            "Run `rlab continue` / `rlab eval` first, or pass --results-dir / --experiment.",
        )
    data = collect(layout, baseline, seed=seed, draws=draws, allow_mismatch=allow_mismatch)
    if data.meta.empty:
        raise RlabError(
            f"Experiment '{layout.experiment}' has no runs or evals yet ({layout.root}).",
            "Run `rlab eval --tag TAG` first.",
        )
    written = [layout.results_csv]
    write_results_csv(layout.results_csv, data.results)
    plots: dict[str, Path | None] = {}
    copy = None
    document = None
    if fmt in ("md", "html"):
        plots = write_plots(data, layout.plots_dir)
        for key, path in plots.items():
            if path is None:
                if not (key == "passkey" and passkey_all_zero(data)):
                    data.footnotes.add(f"plot {PLOT_FILES[key]} not drawn: no informative data for it yet")
            else:
                written.append(path)
        tables = all_tables(data)
        copy = copy_distance.build(data, layout.plots_dir)
        if copy is not None and copy.plot is not None:
            written.append(copy.plot)
        document = report_document(data, tables, plots, seed, draws, copy)
        written += write_document(
            document, layout.comparison_md, layout.comparison_html, html_too=fmt == "html"
        )
    return ReportOutput(
        data, main_tables(data), answer_items(data, copy), written, document, answer_of(data, copy)
    )


def write_document(document: doc.Document, md_path: Path, html_path: Path, *, html_too: bool) -> list[Path]:
    """`document` as markdown at `md_path` (and HTML at `html_path`), each file written atomically and both
    under `md_path`'s inter-process lock, so a concurrent writer never interleaves the pair. The one writer
    for `rlab report` and `rlab compare`; returns the paths written."""
    written = [md_path]
    with lock_for(md_path):
        write_text_atomic(md_path, md.to_markdown(document))
        if html_too:
            write_text_atomic(html_path, html_page.to_html(document))
            written.append(html_path)
    return written
