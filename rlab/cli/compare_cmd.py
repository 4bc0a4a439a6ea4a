"""`rlab compare A B`: several experiments in one report, arms labelled `<experiment>/<arm>`.

    rlab compare scale4 scale8                      # each arm of scale8 vs the same arm of scale4
    rlab compare a.yaml b.yaml --baseline a/rope    # every arm vs one arm
    rlab compare A B --arms yarn                    # A/yarn vs B/yarn only

Writes <results root of the first>/_compare/A+B/{comparison.md,plots/} (never a single experiment's
report). The work is `rlab.report.assemble.compare`; this module resolves the arguments and renders.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from rlab.cli.console import out
from rlab.cli.options import STATS_PANEL, DrawsOpt, QuietOpt, TablesJsonOpt, in_panel
from rlab.paths import ComparisonLayout, ExperimentLayout


class CompareFormat(str, Enum):
    md = "md"
    html = "html"


def _layout(target: str, results_dir: Path | None):
    """An experiment name (folder under the results dir) or a spec file -> its ExperimentLayout."""
    from rlab.orchestrate.experiments import resolve_experiment

    path = Path(target)
    if target.endswith((".yaml", ".yml")) or path.is_file():
        name, root = resolve_experiment(None, path, results_dir)
    else:
        name, root = resolve_experiment(target, None, results_dir)
    return ExperimentLayout(root, name)


def compare(
    experiments: Annotated[
        list[str],
        typer.Argument(
            metavar="EXPERIMENT",
            show_default=False,
            help="Two or more experiment names (folders under the results dir) or "
            "spec files. The first is the reference.",
        ),
    ],
    baseline: Annotated[
        Optional[str],
        typer.Option(
            "--baseline",
            help="Compare every arm with this one (EXPERIMENT/ARM, or an arm name: the first "
            "experiment's that has it). Default: each arm with the same arm of the first experiment.",
            show_default=False,
        ),
    ] = None,
    arms: Annotated[
        Optional[str],
        typer.Option(
            "--arms",
            help="Only these arms, comma-separated (NAME or EXPERIMENT/NAME), e.g. yarn.",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        CompareFormat,
        typer.Option(
            "--format", case_sensitive=False, help="md: comparison.md + plot; html: also comparison.html."
        ),
    ] = CompareFormat.md,
    results_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--results-dir",
            help="Results root holding the named experiments (default: $RLAB_RESULTS_DIR or "
            "./results); spec files use their own.",
            file_okay=False,
        ),
    ] = None,
    seed: Annotated[int, in_panel("--seed", STATS_PANEL, "Seed of the sign-flip tests' draws.")] = 0,
    draws: DrawsOpt = 20000,
    quiet: QuietOpt = False,
    as_json: TablesJsonOpt = False,
) -> None:
    """Compare two or more experiments: paired differences where they were evaluated alike, one report."""
    from rlab.cli.report_view import print_written, rich_table, rich_text
    from rlab.report.assemble.compare import collect_comparison
    from rlab.report.comparison_document import write_comparison

    layouts = [_layout(t, results_dir) for t in experiments]
    wanted = [a.strip() for a in arms.split(",") if a.strip()] if arms else None
    comp = collect_comparison(layouts, baseline=baseline, arms=wanted, seed=seed, draws=draws)
    target = ComparisonLayout(layouts[0].results_root, tuple(comp.experiments))
    report = write_comparison(target, comp, fmt=fmt.value, seed=seed, draws=draws)
    if as_json:
        typer.echo(_json(report))
        return
    if not quiet:
        for item in report.items:
            out.print(rich_text(item.text), soft_wrap=True)
        out.print()
        for table in report.tables[:2]:  # the experiments and the paired differences; estimates in the file
            out.print(rich_table(table))
            out.print()
    print_written(report.written)


def _json(report) -> str:
    from rlab.cli.report_view import frame_rows, tables_json

    comp = report.comparison
    return json.dumps(
        {
            "experiments": comp.experiments,
            "pairing": "by arm" if comp.by_arm else "baseline",
            "reference": comp.data.baseline,
            "primary": comp.data.primary.description,
            "answer": report.answer,
            "comparisons": frame_rows(comp.data.comparisons),
            "mismatches": [m.sentence() for m in comp.data.mismatches],
            "training_differences": comp.training_notes,
            "notes": list(comp.data.footnotes.items),
            "written": [str(p) for p in report.written],
            "tables": tables_json(report.tables),
        },
        indent=2,
    )
