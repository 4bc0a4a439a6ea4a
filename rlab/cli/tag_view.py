"""Tags on the terminal: the table `rlab ls` and `rlab status` print (`rlab.orchestrate.tag_state` decides each
tag's state; this module only lays the records out)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from rlab.orchestrate.tag_state import LIVE_STATES, Architecture, Headline, TagRecord

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


def step_text(record: TagRecord) -> str:
    """`40/100` while a run is unfinished, else the step."""
    if record.step is None:
        return "-"
    unfinished = record.end_step is not None and record.state in LIVE_STATES
    return f"{record.step}/{record.end_step}" if unfinished else str(record.step)


def _arch_text(architecture: Architecture | None) -> str:
    """`2025`, `2026 SSSL`, or `?` (unreadable): the short form of nanochat's architecture generation."""
    if architecture is None:
        return "-"
    if not architecture.name.startswith("nanochat-"):
        return "?"
    pattern = architecture.window_pattern or "L"
    return architecture.name.removeprefix("nanochat-") + ("" if set(pattern) == {"L"} else f" {pattern}")


def _metric_text(metrics: Headline, key: str, fmt: str) -> str:
    """One metric cell; a CORE on some of the bundle's tasks says how many: `0.123 (2/22)`."""
    value = getattr(metrics, key)
    if value is None:
        return "-"
    text = fmt.format(value)
    if key == "core" and metrics.core_tasks is not None:
        text += f" ({metrics.core_tasks}/{metrics.core_bundle_tasks or '?'})"
    return text


def records_table(records: list[TagRecord], width: int = 80) -> Table:
    """The records as a compact table, one line per tag: numbers are never cut, and the RoPE column (the widest,
    also in --json) is left out when the rest would not fit `width` with it."""
    metrics = [m for m in METRIC_COLUMNS if any(getattr(r.metrics, m[0]) is not None for r in records)]
    rows = []
    for r in records:
        style = STATE_STYLE.get(r.state, "")
        cells = [
            r.tag,
            f"[{style}]{r.state}[/]" if style else r.state,
            step_text(r),
            str(r.seq_len or "-"),
            _arch_text(r.architecture),
            r.rope,
        ]
        cells += [_metric_text(r.metrics, key, fmt) for key, _, fmt in metrics]
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
