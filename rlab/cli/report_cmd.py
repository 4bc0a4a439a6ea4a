"""`rlab report`: results.csv, comparison tables and plots of one experiment, and the main tables on screen.

    rlab report --experiment demo                 # results/demo/{results.csv,comparison.md,plots/}
    rlab report --spec experiments/x.yaml --baseline rope --format html

The work is `rlab.report.build.write_report`; this module only resolves the flags and renders the
returned tables with rich.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from rlab.cli.console import err, out
from rlab.cli.options import STATS_PANEL, DrawsOpt, QuietOpt, TablesJsonOpt, a_name, in_panel
from rlab.errors import RlabError
from rlab.paths import ExperimentLayout


class ReportFormat(str, Enum):
    """What `rlab report` writes besides results.csv."""

    md = "md"
    html = "html"
    csv = "csv"


REPORT_EPILOG = """Examples:

  rlab report -e demo                          # results/demo/{results.csv,comparison.md,plots/}

  rlab report --spec experiments/demo.yaml --baseline rope --format html

  rlab report -e demo --json | jq .tables      # machine-readable: what it wrote and every table
"""


def build_report(
    spec: Annotated[
        Optional[Path],
        typer.Option(
            "--spec", "-s", help="Experiment spec YAML; its `name` picks the experiment.", dir_okay=False
        ),
    ] = None,
    experiment: Annotated[
        Optional[str],
        typer.Option(
            "--experiment",
            "-e",
            callback=a_name("experiment"),
            help="Experiment name (folder under the results dir). Default: the spec's name, "
            "or the only experiment there.",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        Optional[str],
        typer.Option(
            "--baseline",
            help="Variant every other is compared with (any case). (default: the spec's, else rope)",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            case_sensitive=False,
            help="md: results.csv + comparison.md + plots; html: also comparison.html; csv: results.csv only.",
        ),
    ] = ReportFormat.md,
    results_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--results-dir",
            help="Results root holding <experiment>/ (default: $RLAB_RESULTS_DIR or ./results).",
            file_okay=False,
        ),
    ] = None,
    seed: Annotated[
        int,
        in_panel(
            "--seed",
            STATS_PANEL,
            "Seed of the sign-flip tests' draws (the report is deterministic for a given seed).",
        ),
    ] = 0,
    draws: DrawsOpt = 20000,
    quiet: QuietOpt = False,
    allow_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-mismatch",
            help="Give better/worse verdicts even between tags evaluated or trained "
            "differently (recorded in the report).",
        ),
    ] = False,
    as_json: TablesJsonOpt = False,
    calibrate: Annotated[
        bool,
        in_panel(
            "--calibrate",
            STATS_PANEL,
            "Also re-run each family's tests on plasmode nulls (this experiment's own per-unit differences, "
            "centred and resampled) and print the familywise errors found (a minute or more).",
        ),
    ] = False,
) -> None:
    """Write results.csv, comparison.md and plots for an experiment, and show the main tables."""
    from rlab.cli.report_view import print_written
    from rlab.orchestrate.experiments import resolve_experiment
    from rlab.report.build import write_report

    name, root = resolve_experiment(experiment, spec, results_dir)
    layout = ExperimentLayout(root, name)
    if layout.root.is_dir() and not any(layout.root.glob("evals/*/eval.json")):
        raise RlabError(
            f"Experiment '{name}' has no evals yet (no eval.json under {layout.root / 'evals'}).",
            f"Evaluate its tags first: rlab eval --all -e {name}"
            + (f" --results-dir {results_dir.absolute()}" if results_dir else ""),
        )
    from rlab.report.stats import inference

    with inference.recording_units() as recorded:
        report = write_report(
            layout, baseline=baseline, fmt=fmt.value, seed=seed, draws=draws, allow_mismatch=allow_mismatch
        )
    if calibrate:
        _print_calibration(report.data, recorded, seed)
    if (quiet or as_json) and report.data.mismatches:  # otherwise the opening lines below say it
        from rlab.report.render.headline import mismatch_line

        err.print(
            f"[bold yellow]Warning:[/] {escape(mismatch_line(report.data))}", highlight=False, soft_wrap=True
        )
    if as_json:
        typer.echo(_report_json(name, report))
        return
    if not quiet:
        _print_tables(report)
    print_written(report.written)


def _print_tables(report) -> None:
    """The Answer table with its lines and warnings, every other table, then the notes."""
    from rlab.cli.report_view import rich_block, rich_table, rich_text
    from rlab.report.render import answer as ans

    if report.answer_table is not None:
        out.print(rich_block(ans.table(report.answer_table), ans.title(report.data)))
        for line in report.answer_table.lines:
            out.print(rich_text(line))
        out.print()
        for item in report.answer_table.warnings:
            out.print(rich_text(item.text), style="dim" if item.tone == "note" else "")
        out.print()
    for table in report.tables:
        if not table.frame.empty:
            out.print(rich_table(table))
            out.print()
    notes = report.data.footnotes.items
    if notes:
        out.print("[bold]Notes[/]")
        for i, text in enumerate(notes, start=1):
            out.print(f"  [dim]{i}.[/] {escape(text)}")
        out.print()


def _report_json(name: str, report) -> str:
    """The report as one JSON document: the Answer table as typed rows (estimate, interval, verdict per column),
    the verdicts in words, the baseline, what was written, every table's rows."""

    from rlab.cli.report_view import tables_json
    from rlab.report.render.document import plain

    return json.dumps(
        {
            "experiment": name,
            "baseline": report.data.baseline,
            "answer": list(report.answer),
            "answer_table": (
                {
                    "columns": [
                        {"key": c.key, "header": c.header, "definition": c.definition}
                        for c in report.answer_table.columns
                    ],
                    "rows": report.answer_table.json_rows(),
                    "lines": [plain(line) for line in report.answer_table.lines],
                }
                if report.answer_table is not None
                else None
            ),
            "notes": list(report.data.footnotes.items),
            "written": [str(p) for p in report.written],
            "mismatches": [m.sentence() for m in report.data.mismatches],
            "allow_mismatch": report.data.allow_mismatch,
            "tables": tables_json(report.tables),
        },
        indent=2,
    )


def _print_calibration(data, recorded, seed: int) -> None:
    """`--calibrate`: the plasmode familywise error of each family (the estimands' too), on stderr (stdout stays
    the report's)."""
    from rlab.report.estimands import calibration
    from rlab.report.stats import plasmode

    frames = [data.comparisons, data.copy_cells, data.copy_retention]
    found = plasmode.calibrate(recorded, [f for f in frames if f is not None], seed=seed)
    found += [plasmode.family_error(n, u, seed=seed) for n, u in calibration.families(data, seed).items()]
    for e in found:
        err.print(f"Calibration: {e.line()}", highlight=False, soft_wrap=True)
