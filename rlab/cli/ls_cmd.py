"""`rlab ls`: every tag under the base dir: state, training length, architecture, RoPE and headline metrics.

The records come from `rlab.orchestrate.tag_state`; `rlab.cli.tag_view` lays them out (a table that fits 80
columns), or this module prints them as JSON (--json).
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator, rich tables) are local to the functions that use
# them, so `rlab --help` stays fast.
import json

import typer

from rlab.cli.console import out
from rlab.cli.options import BaseDirOpt, ExperimentFilterOpt, JsonOpt, ResultsDirOpt
from rlab.paths import BaseLayout, default_base_dir


def list_tags(
    experiment: ExperimentFilterOpt = None,
    base_dir: BaseDirOpt = None,
    results_dir: ResultsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List tags: state (training/stopped/failed/done/evaluated), step, seq_len, RoPE config, headline metrics."""

    from rlab.cli.tag_view import records_table
    from rlab.orchestrate.experiments import experiment_filter
    from rlab.orchestrate.tag_state import tag_records

    base = BaseLayout((base_dir or default_base_dir()).expanduser())
    experiment, results_root = experiment_filter(experiment, results_dir)
    records = [  # the experiment's tags and the checkpoints no experiment claims (its base)
        r for r in tag_records(base, results_root) if experiment is None or r.experiment in (experiment, None)
    ]
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "base_dir": str(base.root),
                    "results_dir": str(results_root),
                    "tags": [r.as_dict() for r in records],
                },
                indent=2,
            )
        )
        return
    if not records:
        out.print(f"No checkpoints under {base.checkpoints_root}.", highlight=False, markup=False)
        return
    out.print(f"Tags in {base.checkpoints_root}", highlight=False, markup=False)
    out.print(records_table(records, out.width))
    out.print(
        "bpb: val BPB (eval.json, else the last in-training one); pk: passkey accuracy. All fields: --json",
        style="dim",
        highlight=False,
    )
