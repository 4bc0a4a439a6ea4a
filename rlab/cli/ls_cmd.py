"""`rlab ls`: every tag under the base dir: state, training length, architecture, RoPE and headline metrics.

The records come from `rlab.orchestrate.tag_state`; `rlab.cli.tag_view` lays them out (a table that fits 80
columns), or this module prints them as JSON (--json).
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator, rich tables) are local to the functions that use
# them, so `rlab --help` stays fast.
import json
from pathlib import Path

import typer

from rlab.cli.console import out
from rlab.cli.options import tags_command
from rlab.paths import BaseLayout


def _list_tags(base: BaseLayout, results_root: Path, experiment: str | None, as_json: bool) -> None:
    """List tags: state (training/stopped/failed/done/evaluated), step, seq_len, RoPE config, headline metrics."""

    from rlab.cli.tag_view import records_table
    from rlab.orchestrate.tag_state import tag_records

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


list_tags = tags_command(_list_tags)
