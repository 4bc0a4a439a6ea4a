"""`rlab status`: what is running or unfinished right now: training jobs (live, stopped, failed) and evals.

    rlab status                 # every experiment under the results root
    rlab status -e demo --json

A live job is one whose tag lock is held (rlab.orchestrate.lock); progress and ETA come from its
metrics.jsonl. Finished tags are `rlab ls`'s business.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rlab.cli.console import out
from rlab.cli.options import tags_command
from rlab.paths import BaseLayout


def _status(base: BaseLayout, results_root: Path, experiment: str | None, as_json: bool) -> None:
    """Show runs in progress, stopped or failed (step/total, loss, ETA, log) and unfinished evals."""
    from rlab.cli.tag_view import records_table
    from rlab.orchestrate.tag_state import LIVE_STATES, eval_records, tag_records

    base, results_root = BaseLayout(base.root.absolute()), results_root.absolute()
    runs = [
        r
        for r in tag_records(base, results_root)
        if r.state in LIVE_STATES and (experiment is None or r.experiment == experiment)
    ]
    evals = [r for r in eval_records(results_root) if experiment is None or r.experiment == experiment]
    if as_json:
        typer.echo(
            json.dumps({"runs": [r.as_dict() for r in runs], "evals": [r.as_dict() for r in evals]}, indent=2)
        )
        return
    if not runs and not evals:
        out.print(
            "Nothing running or unfinished"
            + (f" in experiment {experiment}" if experiment else "")
            + f" (base dir {base.root}, results {results_root}). Finished tags: rlab ls",
            highlight=False,
            markup=False,
        )
        return
    if runs:
        out.print("Training runs", highlight=False, markup=False)
        out.print(records_table(runs, out.width))
        for r in runs:
            if r.state == "training":
                out.print(
                    f"{r.tag}: {r.holder}; log {r.log}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
            else:
                hint = (
                    f"rlab continue --spec {results_root / r.experiment / 'spec.resolved.yaml'} "
                    f"--variants {r.variant or '<variant>'} --resume"
                    if r.experiment
                    else "rlab continue ... --resume"
                )
                error = r.error or ""
                said = error if error.startswith(r.state) else r.state + (f" ({error})" if error else "")
                out.print(
                    f"{r.tag}: {said}; log {r.log}; finish it with: {hint}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
    for e in evals:
        out.print(
            f"{e.tag} ({e.experiment}): {e.state}; log {e.log}; "
            f"rerun: rlab eval --tag {e.tag} -e {e.experiment}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


status = tags_command(_status)
