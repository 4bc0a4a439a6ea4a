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

import typer

from rlab.cli.console import out
from rlab.cli.options import at_least
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
    experiments: list[str] = typer.Argument(
        ...,
        metavar="EXPERIMENT",
        show_default=False,
        help="Two or more experiment names (folders under the results dir) or "
        "spec files. The first is the reference.",
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="Compare every arm with this one (EXPERIMENT/ARM, or an arm name: the first "
        "experiment's that has it). Default: each arm with the same arm of the first experiment.",
        show_default=False,
    ),
    arms: str | None = typer.Option(
        None,
        "--arms",
        help="Only these arms, comma-separated (NAME or EXPERIMENT/NAME), e.g. yarn.",
        show_default=False,
    ),
    fmt: CompareFormat = typer.Option(
        CompareFormat.md,
        "--format",
        case_sensitive=False,
        help="md: comparison.md + plot; html: also comparison.html.",
    ),
    results_dir: Path | None = typer.Option(
        None,
        "--results-dir",
        help="Results root holding the named experiments (default: $RLAB_RESULTS_DIR or "
        "./results); spec files use their own.",
        file_okay=False,
    ),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the sign-flip tests' draws.", rich_help_panel="Statistics"
    ),
    draws: int = typer.Option(
        20000,
        "--draws",
        "--bootstrap",
        metavar="N",
        callback=at_least(100),
        help="Monte Carlo draws per sign-flip test (p resolves to 1/(draws+1); tests of 16 units or fewer are exact).",
        rich_help_panel="Statistics",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the tables."),
    as_json: bool = typer.Option(
        False, "--json", help="Print what was written and every table as JSON (stdout)."
    ),
) -> None:
    """Compare two or more experiments: paired differences where they were evaluated alike, one report."""
    from rlab.cli.report_view import rich_table, rich_text
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
    out.print("[bold]Wrote[/]")
    for path in report.written:
        out.print(f"  {path}", highlight=False, markup=False, soft_wrap=True)


def _json(report) -> str:

    comp = report.comparison
    tables = [
        {
            "title": t.title,
            "caption": t.caption or None,
            "rows": json.loads(t.frame.to_json(orient="records", default_handler=str)),
        }
        for t in report.tables
    ]
    pairs = json.loads(comp.data.comparisons.to_json(orient="records", default_handler=str))
    return json.dumps(
        {
            "experiments": comp.experiments,
            "pairing": "by arm" if comp.by_arm else "baseline",
            "reference": comp.data.baseline,
            "primary": comp.data.primary.description,
            "answer": report.answer,
            "comparisons": pairs,
            "mismatches": [m.sentence() for m in comp.data.mismatches],
            "training_differences": comp.training_notes,
            "notes": list(comp.data.footnotes.items),
            "written": [str(p) for p in report.written],
            "tables": tables,
        },
        indent=2,
    )
