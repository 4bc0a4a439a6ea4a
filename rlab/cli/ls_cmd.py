"""`rlab ls`: every tag under the base dir: state, training length, architecture, RoPE and headline metrics.

The records come from `rlab.cli.tag_state`; this module only lays them out (a table that fits 80
columns, or JSON with --json).
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator, rich tables) are local to the functions that use
# them, so `rlab --help` stays fast.
import json

from rlab.cli.options import BaseDirOpt, ExperimentFilterOpt, JsonOpt, ResultsDirOpt
from rlab.paths import BaseLayout, default_base_dir

STATE_STYLE = {
    "training": "bold cyan",
    "failed": "red",
    "diverged": "red",
    "stalled": "red",
    "eval unreadable": "red",
    "stopped": "yellow",
    "done": "green",
    "evaluated": "bold green",
    "base": "dim",
}


METRIC_COLUMNS = (("val_bpb", "bpb", "{:.3f}"), ("core", "CORE", "{:.3f}"), ("passkey", "pk", "{:.2f}"))


def step_text(record: dict) -> str:
    step, end = record.get("step"), record.get("end_step")
    if step is None:
        return "-"
    return (
        f"{step}/{end}"
        if end is not None and record["state"] in ("training", "stalled", "stopped", "failed", "diverged")
        else str(step)
    )


def _arch_text(architecture: dict | None) -> str:
    """`2025`, `2026 SSSL`, or `?` (unreadable): the short form of nanochat's architecture generation."""
    if not architecture:
        return "-"
    name = architecture.get("name", "?")
    if not name.startswith("nanochat-"):
        return "?"
    pattern = architecture.get("window_pattern") or "L"
    return name.removeprefix("nanochat-") + ("" if set(pattern) == {"L"} else f" {pattern}")


def _metric_text(metrics: dict, key: str, fmt: str) -> str:
    """One metric cell; a CORE on some of the bundle's tasks says how many: `0.123 (2/22)`."""
    if key not in metrics:
        return "-"
    text = fmt.format(metrics[key])
    if key == "core" and metrics.get("core_tasks") is not None:
        text += f" ({metrics['core_tasks']}/{metrics.get('core_bundle_tasks') or '?'})"
    return text


def records_table(records: list[dict], width: int = 80):
    """The records as a compact table, one line per tag: numbers are never cut, and the RoPE column (the widest,
    also in --json) is left out when the rest would not fit `width` with it."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    metrics = [m for m in METRIC_COLUMNS if any(m[0] in r["metrics"] for r in records)]
    rows = []
    for r in records:
        style = STATE_STYLE.get(r["state"], "")
        cells = [
            r["tag"],
            f"[{style}]{r['state']}[/]" if style else r["state"],
            step_text(r),
            str(r["seq_len"] or "-"),
            _arch_text(r.get("architecture")),
            r["rope"],
        ]
        cells += [_metric_text(r["metrics"], key, fmt) for key, _, fmt in metrics]
        rows.append(cells)
    headers = ["tag", "state", "step", "seq", "arch", "rope", *(header for _, header, _ in metrics)]

    def build(columns: list[int]) -> Table:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
        for i in columns:
            table.add_column(
                headers[i],
                no_wrap=True,
                justify="left" if headers[i] in ("tag", "state", "arch", "rope") else "right",
            )
        for cells in rows:
            table.add_row(*(cells[i] for i in columns))
        return table

    table = build(list(range(len(headers))))
    if Console(width=10_000).measure(table).maximum > width:
        table = build([i for i, h in enumerate(headers) if h != "rope"])
    return table


def list_tags(
    experiment: ExperimentFilterOpt = None,
    base_dir: BaseDirOpt = None,
    results_dir: ResultsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List tags: state (training/stopped/failed/done/evaluated), step, seq_len, RoPE config, headline metrics."""
    import typer

    from rlab.cli.console import out
    from rlab.cli.tag_state import tag_records
    from rlab.orchestrate.experiments import experiment_filter

    base = BaseLayout((base_dir or default_base_dir()).expanduser())
    experiment, results_root = experiment_filter(experiment, results_dir)
    records = [  # the experiment's tags and the checkpoints no experiment claims (its base)
        r
        for r in tag_records(base, results_root)
        if experiment is None or r["experiment"] in (experiment, None)
    ]
    if as_json:
        typer.echo(
            json.dumps(
                {"base_dir": str(base.root), "results_dir": str(results_root), "tags": records}, indent=2
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
