"""`write_report`: collect an experiment's outputs and write results.csv, comparison.md/.html and plots.

The one entry point the CLI calls. It returns what it built (frames, tables, paths) and leaves all
terminal rendering to the CLI.
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rlab.atomic_io import write_text_atomic
from rlab.errors import RlabError
from rlab.paths import ExperimentLayout
from rlab.report import uncertainty as unc
from rlab.report.collect import ReportData, collect
from rlab.report.plots import PLOT_FILES, write_plots
from rlab.report.results_csv import lock_for, write_results_csv
from rlab.report.tables import Table, all_tables, main_tables, to_html, to_markdown

log = logging.getLogger(__name__)

ReportFormat = Literal["md", "csv", "html"]
FORMATS: tuple[str, ...] = ("md", "csv", "html")
_PLOT_CAPTIONS = {
    "bpb_length": "BPB vs context length (headline)",
    "loss": "Training loss per variant",
    "val_bpb": "Validation BPB during training",
    "passkey": "Passkey accuracy heatmap",
}


@dataclass
class ReportOutput:
    data: ReportData
    tables: list[Table]
    """The main tables (for the terminal)."""
    written: list[Path] = field(default_factory=list)


def mismatch_lines(data: ReportData) -> list[str]:
    """What makes compared tags incomparable, one line each (empty when everything agrees)."""
    if not data.mismatches:
        return []
    head = ("Verdicts were given across these differences anyway (--allow-mismatch):" if data.allow_mismatch else
            "Not comparable: no better/worse verdict is given where these differences apply "
            "(re-evaluate with the same settings and code, or pass --allow-mismatch):")
    return [head, *(f"- {m.sentence()}" for m in data.mismatches)]


def _intro(data: ReportData, seed: int, n_boot: int) -> list[str]:
    base = f"`{data.baseline}`" + (f" (tag `{data.baseline_tag}`)" if data.baseline_tag else " (not found)")
    warning = mismatch_lines(data)
    return [
        f"# Experiment `{data.experiment}`: RoPE variants compared with {base}",
        "",
        *([f"**{warning[0]}**", "", *warning[1:], ""] if warning else []),
        f"Tags: {len(data.meta)}. `x ± h`: estimate and half-width of its 95% bootstrap interval "
        f"({n_boot} resamples, seed {seed}; BPB over eval units, CORE over examples). A variant is called "
        "**better** or **worse** than the baseline only when the 95% interval of the paired difference "
        "excludes 0; otherwise it is *≈ within noise*.",
        "",
    ]


def render_markdown(data: ReportData, tables: list[Table], plots: dict[str, Path | None], seed: int,
                    n_boot: int) -> str:
    lines = _intro(data, seed, n_boot)
    for table in tables:
        lines += [f"## {table.title}", "", to_markdown(table).rstrip("\n")]
        if table.caption and not table.frame.empty:
            lines += ["", f"_{table.caption}_"]
        lines.append("")
        if table.title.startswith("BPB vs context length") and plots.get("bpb_length"):
            lines += [f"![BPB vs context length](plots/{PLOT_FILES['bpb_length']})", ""]
    shown = [k for k in ("loss", "val_bpb", "passkey") if plots.get(k)]
    if shown:
        lines += ["## Plots", ""]
        for key in shown:
            lines += [f"![{_PLOT_CAPTIONS[key]}](plots/{PLOT_FILES[key]})", ""]
    if data.footnotes.items:
        lines += ["## Notes", ""]
        lines += [f"{i}. {text}" for i, text in enumerate(data.footnotes.items, start=1)]
        lines.append("")
    return "\n".join(lines)


def render_html(data: ReportData, tables: list[Table], plots: dict[str, Path | None], seed: int,
                n_boot: int) -> str:
    intro = _intro(data, seed, n_boot)
    parts = [
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">",
        f"<title>rlab report: {html.escape(data.experiment)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:right}td:first-child,th:first-child{text-align:left}.best{font-weight:bold;"
        "background:#e6f4e6}img{max-width:100%}</style></head><body>",
        f"<h1>{html.escape(intro[0].lstrip('# ').replace('`', ''))}</h1>",
        *([f"<p><strong>{html.escape(w)}</strong></p>" for w in mismatch_lines(data)[:1]]),
        *([f"<ul>{''.join(f'<li>{html.escape(w[2:])}</li>' for w in mismatch_lines(data)[1:])}</ul>"]
          if data.mismatches else []),
        f"<p>{html.escape(intro[-2].replace('**', '').replace('*', '').replace('`', ''))}</p>",
    ]
    for table in tables:
        parts += [f"<h2>{html.escape(table.title)}</h2>", to_html(table)]
        if table.caption and not table.frame.empty:
            parts.append(f"<p><em>{html.escape(table.caption)}</em></p>")
    for key in ("bpb_length", "loss", "val_bpb", "passkey"):
        if plots.get(key):
            parts.append(f"<h2>{_PLOT_CAPTIONS[key]}</h2><img src=\"plots/{PLOT_FILES[key]}\" "
                         f"alt=\"{_PLOT_CAPTIONS[key]}\">")
    if data.footnotes.items:
        parts.append("<h2>Notes</h2><ol>" + "".join(f"<li>{html.escape(t)}</li>" for t in data.footnotes.items)
                     + "</ol>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(layout: ExperimentLayout, *, baseline: str | None = None, fmt: str = "md", seed: int = 0,
                 n_boot: int = unc.DEFAULT_BOOT, allow_mismatch: bool = False) -> ReportOutput:
    """Build the report of one experiment into its results folder.

    Always writes results.csv; ``md`` adds comparison.md and the plots; ``html`` adds comparison.html
    as well; ``csv`` writes results.csv only.
    """
    if fmt not in FORMATS:
        raise RlabError(f"Unknown report format '{fmt}'.", f"Use one of: {', '.join(FORMATS)}.")
    if not layout.root.is_dir():
        raise RlabError(f"No results for experiment '{layout.experiment}' under {layout.results_root}.",
                        "Run `rlab continue` / `rlab eval` first, or pass --results-dir / --experiment.")
    data = collect(layout, baseline, seed=seed, n_boot=n_boot, allow_mismatch=allow_mismatch)
    if data.meta.empty:
        raise RlabError(f"Experiment '{layout.experiment}' has no runs or evals yet ({layout.root}).",
                        "Run `rlab eval --tag TAG` first.")
    written = [layout.results_csv]
    write_results_csv(layout.results_csv, data.results)
    plots: dict[str, Path | None] = {}
    if fmt in ("md", "html"):
        plots = write_plots(data, layout.plots_dir)
        for key, path in plots.items():
            if path is None:
                data.footnotes.add(f"plot {PLOT_FILES[key]} not drawn: no data for it yet")
            else:
                written.append(path)
        tables = all_tables(data)
        with lock_for(layout.comparison_md):
            write_text_atomic(layout.comparison_md, render_markdown(data, tables, plots, seed, n_boot))
            written.append(layout.comparison_md)
            if fmt == "html":
                html_path = layout.comparison_md.with_suffix(".html")
                write_text_atomic(html_path, render_html(data, tables, plots, seed, n_boot))
                written.append(html_path)
    return ReportOutput(data=data, tables=main_tables(data), written=written)
