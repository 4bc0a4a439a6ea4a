"""CORE task selection on the command line: `rlab eval --list-tasks` and the check of `--tasks` before a launch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from rlab.cli.console import out


def bundle_dir(
    spec_path: Path | None, eval_bundle: Path | None, *, base_dir: Path | None, results_dir: Path | None
) -> Path:
    """The bundle `rlab eval` would use: --eval-bundle, else the spec's eval.core_bundle, else the one
    `rlab.paths.find_eval_bundle` finds ($RLAB_EVAL_BUNDLE, <base_dir>/eval_bundle, the download cache)."""
    from rlab.evals.core.bundle import bundle_root
    from rlab.evals.core.settings import CoreSettings
    from rlab.orchestrate.plan import base_layout
    from rlab.spec.loading import load_spec

    if eval_bundle is not None:
        return eval_bundle
    spec = load_spec(spec_path, base_dir=base_dir, results_dir=results_dir)
    return bundle_root(base_layout(spec).root, CoreSettings.of(spec.eval).core_bundle)


def print_tasks(
    spec_path: Path | None,
    eval_bundle: Path | None,
    *,
    base_dir: Path | None,
    results_dir: Path | None,
    as_json: bool,
) -> None:
    """One row per task of the bundle's core.yaml: label, type, few-shot, random baseline, data file present."""

    from rlab.evals.core.bundle import load_bundle, quiet_bundle_warnings

    with quiet_bundle_warnings():
        bundle = load_bundle(bundle_dir(spec_path, eval_bundle, base_dir=base_dir, results_dir=results_dir))
    by_label = {t.label: (t, t not in bundle.missing) for t in bundle.tasks + bundle.missing}
    rows: list[dict[str, Any]] = [
        {
            "task": label,
            "type": by_label[label][0].task_type,
            "fewshot": by_label[label][0].num_fewshot,
            "baseline_pct": by_label[label][0].baseline,
            "present": by_label[label][1],
        }
        for label in bundle.labels
    ]
    if as_json:
        typer.echo(json.dumps({"bundle": str(bundle.root), "tasks": rows}, indent=2))
        return
    table = Table(title=f"CORE tasks in {bundle.root} ({len(rows)})", title_justify="left", box=None)
    for column in ("task", "type", "shots", "random %", "data"):
        table.add_column(column, no_wrap=column == "task")
    for r in rows:
        table.add_row(
            r["task"],
            r["type"],
            str(r["fewshot"]),
            f"{r['baseline_pct']:g}",
            "ok" if r["present"] else "[red]missing[/]",
        )
    out.print(table)
    out.print("Pick some with --tasks, e.g. --tasks hellaswag,arc_* (globs work).", highlight=False)
