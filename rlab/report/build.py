"""`write_report`: collect an experiment's outputs and write results.csv, comparison.md/.html and plots.

The one entry point the CLI calls. Both documents open with the answer (one sentence per variant on
the primary endpoint, then what limits it), then the headline plot, then tables that each say what
they measure. The HTML is self-contained: plots are embedded as base64 PNGs. It returns what it
built and leaves terminal rendering to the CLI.
"""

from __future__ import annotations

import base64
import html
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rlab.atomic_io import write_text_atomic
from rlab.errors import RlabError
from rlab.paths import ExperimentLayout
from rlab.report import copy_distance, headline
from rlab.report import inference as inf
from rlab.report import uncertainty as unc
from rlab.report.collect import ReportData, collect
from rlab.report.plots import PLOT_FILES, write_plots
from rlab.report.results_csv import lock_for, write_results_csv
from rlab.report.tables import Table, all_tables, main_tables, passkey_all_zero, to_html, to_markdown

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
    answer: list[str] = field(default_factory=list)
    """The opening lines: verdict sentences, then warnings (markdown emphasis)."""
    written: list[Path] = field(default_factory=list)


def answer_lines(data: ReportData, copy: copy_distance.CopySection | None = None) -> list[str]:
    """Verdicts, then what limits them: the report's warnings, and whether the models use context at all."""
    limits = list(headline.warnings(data))
    if copy is not None and copy.caveat:
        limits.append(copy.caveat)
    if (line := _passkey_line(data)) is not None:
        limits.append(line)
    return (
        headline.sentences(data)
        + (copy.answer if copy is not None else [])
        + [f"Warning: {w}" for w in limits]
        + [f"Note: {n}" for n in headline.disagreements(data)]
    )


def _method(data: ReportData, seed: int, draws: int) -> str:
    bpb = (
        "BPB by documents (blocks of one document summed into one unit)"
        if data.clustered
        else "BPB by eval units (each taken as independent: they do not name their documents)"
    )
    return (
        f"`x ± h`: estimate and half-width of its studentized (t) 95% interval over independent units: {bpb}, "
        f"CORE by examples stratified by task, passkey by keys (Wilson intervals per cell). Each comparison is "
        f"paired on the units both arms scored; its p-value comes from a sign-flip permutation test (exact up to "
        f"{inf.EXACT_SIGN_FLIP_MAX} units, else {draws} Monte Carlo draws, seed {seed}), or, with several "
        f"training seeds per arm, from the t test whose seed term has S - 1 degrees of freedom (the seed is the "
        f"replicate of training noise). " + headline.multiplicity_note(data)
    )


def _passkey_line(data: ReportData) -> str | None:
    if not passkey_all_zero(data):
        return None
    n = int(data.passkey["n"].sum() / max(1, data.passkey["tag"].nunique()))
    lengths = ", ".join(str(L) for L in sorted(set(data.passkey["length"].astype(int))))
    return (
        f"Passkey retrieval: accuracy 0 for every arm at every length ({lengths}) and depth "
        f"({n} keys per tag): no model here retrieves; no table or plot is drawn."
    )


def render_markdown(
    data: ReportData,
    tables: list[Table],
    plots: dict[str, Path | None],
    seed: int,
    draws: int,
    copy: copy_distance.CopySection | None = None,
) -> str:
    lines = [f"# Experiment `{data.experiment}`: RoPE variants vs `{data.baseline}`", ""]
    lines += [f"**Answer** (primary endpoint: {data.primary.description}):", ""]
    lines += [f"- {s}" for s in answer_lines(data, copy)] + [""]
    if plots.get("bpb_length"):
        lines += [f"![{_PLOT_CAPTIONS['bpb_length']}](plots/{PLOT_FILES['bpb_length']})", ""]
    lines += [_method(data, seed, draws), ""]
    if copy is not None:
        lines += copy_distance.markdown(copy)
    for table in tables:
        lines += [f"## {table.title}", ""]
        if table.about:
            lines += [table.about, ""]
        lines.append(to_markdown(table).rstrip("\n"))
        if table.caption and not table.frame.empty:
            lines += ["", f"_{table.caption}_"]
        lines.append("")
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


def _inline(text: str) -> str:
    """Markdown's **bold** and `code` in an escaped HTML string; verdict words coloured."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)

    def bold(m: re.Match) -> str:
        inner = m.group(1)
        cls = next(
            (
                c
                for w, c in (
                    ("better", "better"),
                    ("worse", "worse"),
                    ("no verdict", "few"),
                    ("within noise", "noise"),
                )
                if w in inner
            ),
            "",
        )
        return f'<strong class="{cls}">{inner}</strong>' if cls else f"<strong>{inner}</strong>"

    return re.sub(r"\*\*([^*]+)\*\*", bold, out)


def _img(path: Path, alt: str) -> str:
    """An <img> with the PNG embedded as base64 (the HTML needs no files beside it)."""
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1400px;margin:1.5em auto;padding:0 1em;line-height:1.4}"
    "table{border-collapse:collapse;margin:.5em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right;white-space:nowrap}td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}"
    ".best{font-weight:bold}.better{color:#17692a;background:#e3f4e6}.worse{color:#9b1c1c;background:#fbe4e4}"
    ".noise{color:#555}.few{color:#8a5a00;background:#fff4d6}strong.better,strong.worse,strong.few{padding:0 3px}"
    "img{max-width:100%}.answer li{margin:.3em 0}.about{color:#333;margin:.2em 0 .4em}"
    ".caption{color:#555;font-style:italic}.warn{color:#8a5a00}"
)


def _copy_html(copy: copy_distance.CopySection) -> list[str]:
    head, *body = copy_distance.markdown(copy)
    parts = [f"<h2>{html.escape(head.lstrip('# '))}</h2>"]
    rows = [line for line in body if line.startswith("|") and not line.startswith("|---")]
    for line in body:
        if line.startswith("- "):
            parts.append(f"<p>{_inline(line[2:])}</p>")
        elif line and not line.startswith(("|", "!")):
            parts.append(f'<p class="about">{_inline(line)}</p>')
    if copy.plot is not None:
        parts.append(_img(copy.plot, "Copy loss by distance"))
    cells = [
        [html.escape(c.strip()) for c in r.strip().strip("|").split("|")]
        for r in "".join(rows).split("\n")
        if r
    ]
    if cells:
        parts.append(
            "<table><tr>"
            + "".join(f"<th>{c}</th>" for c in cells[0])
            + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in cells[1:])
            + "</table>"
        )
    return parts


def render_html(
    data: ReportData,
    tables: list[Table],
    plots: dict[str, Path | None],
    seed: int,
    draws: int,
    copy: copy_distance.CopySection | None = None,
) -> str:
    title = f"Experiment {data.experiment}: RoPE variants vs {data.baseline}"
    items = [
        f'<li class="warn">{_inline(s)}</li>' if s.startswith("Warning: ") else f"<li>{_inline(s)}</li>"
        for s in answer_lines(data, copy)
    ]
    parts = [
        '<!doctype html>\n<html><head><meta charset="utf-8">',
        f"<title>rlab report: {html.escape(data.experiment)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p><strong>Answer</strong> (primary endpoint: {html.escape(data.primary.description)}):</p>",
        '<ul class="answer">' + "".join(items) + "</ul>",
    ]
    if (bpb_length_plot := plots.get("bpb_length")) is not None:
        parts.append(_img(bpb_length_plot, _PLOT_CAPTIONS["bpb_length"]))
    parts.append(f"<p>{_inline(_method(data, seed, draws))}</p>")
    if copy is not None:
        parts += _copy_html(copy)
    for table in tables:
        parts.append(f"<h2>{html.escape(table.title)}</h2>")
        if table.about:
            parts.append(f'<p class="about">{_inline(table.about)}</p>')
        parts.append(to_html(table))
        if table.caption and not table.frame.empty:
            parts.append(f'<p class="caption">{html.escape(table.caption)}</p>')
    for key in ("loss", "val_bpb", "passkey"):
        if (plot := plots.get(key)) is not None:
            parts.append(f"<h2>{_PLOT_CAPTIONS[key]}</h2>{_img(plot, _PLOT_CAPTIONS[key])}")
    if data.footnotes.items:
        parts.append(
            "<h2>Notes</h2><ol>"
            + "".join(f"<li>{html.escape(t)}</li>" for t in data.footnotes.items)
            + "</ol>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


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
    if fmt in ("md", "html"):
        plots = write_plots(data, layout.plots_dir)
        for key, path in plots.items():
            if path is None:
                if not (key == "passkey" and passkey_all_zero(data)):
                    data.footnotes.add(f"plot {PLOT_FILES[key]} not drawn: no informative data for it yet")
            else:
                written.append(path)
        tables = all_tables(data)
        copy = copy_distance.build(data, layout.plots_dir, seed)
        if copy is not None and copy.plot is not None:
            written.append(copy.plot)
        with lock_for(layout.comparison_md):
            write_text_atomic(layout.comparison_md, render_markdown(data, tables, plots, seed, draws, copy))
            written.append(layout.comparison_md)
            if fmt == "html":
                html_path = layout.comparison_md.with_suffix(".html")
                write_text_atomic(html_path, render_html(data, tables, plots, seed, draws, copy))
                written.append(html_path)
    return ReportOutput(data=data, tables=main_tables(data), answer=answer_lines(data, copy), written=written)
