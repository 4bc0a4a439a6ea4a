"""The report's document pieces on the terminal: verdicts coloured by their `Verdict`, never by their wording.

`rich_text` turns a `rlab.report.render.document.Text` into a rich Text (strong spans bold, code cyan, a verdict bold
in its colour); `rich_table` a report `Table` into a rich table, cells coloured by the verdict they state and the
significant best in bold green; `rich_block` a document table (the report's Answer) with its blocks of rows and
its verdicts as coloured words; `tables_json` and `print_written` the rest of what both print. Shared by
`rlab report` and `rlab compare`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table as RichTable
from rich.text import Text as RichText

from rlab.cli.console import out as console
from rlab.report.stats.verdicts import Verdict

if TYPE_CHECKING:
    import pandas as pd

    from rlab.report.render.document import TableBlock, Text
    from rlab.report.render.table_model import Table

VERDICT_STYLE = {
    Verdict.BETTER: "green",
    Verdict.WORSE: "red",
    Verdict.TOO_FEW_UNITS: "yellow",
    Verdict.UNTESTABLE: "yellow",
    Verdict.NOT_COMPARABLE: "yellow",
}


def rich_text(value: Text) -> RichText:
    out = RichText()
    for span in value:
        if span.verdict is not None:
            out.append(span.text, style=f"bold {VERDICT_STYLE.get(span.verdict, '')}".strip())
        elif span.strong:
            out.append(span.text, style="bold")
        elif span.code:
            out.append(span.text, style="cyan")
        elif span.em:
            out.append(span.text, style="italic")
        else:
            out.append(span.text)
    return out


def rich_table(table: Table) -> RichTable:
    out = RichTable(
        title=table.title, title_justify="left", caption=table.caption or None, caption_justify="left"
    )
    for i, col in enumerate(table.frame.columns):
        out.add_column(str(col), justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r, row in enumerate(table.frame.itertuples(index=False)):
        cells = []
        for col, val in zip(table.frame.columns, row, strict=True):
            text = str(val)
            verdict = table.verdicts.get((r, col))
            style = VERDICT_STYLE.get(verdict) if verdict is not None else None
            if style is None and (r, col) in table.best and text:
                style = "bold green"
            cells.append(RichText(text, style=style or ""))
        out.add_row(*cells)
    return out


def rich_block(block: TableBlock, title: str = "") -> RichTable:
    """A document table: a section line before each block of rows, each verdict a coloured word (its MDE or why
    there is none after it)."""
    out = RichTable(title=title or None, title_justify="left")
    for i, col in enumerate(block.columns):
        out.add_column(col, justify="left" if i == 0 else "right", max_width=24 if i == 0 else None)
    for r, row in enumerate(block.rows):
        if r in block.groups:
            if r:
                out.add_section()
            out.add_row(RichText(block.groups[r], style="italic dim"))
        cells = []
        for cell in row:
            text = RichText(cell.text, style="italic" if cell.em else "")
            if cell.badge:
                style = VERDICT_STYLE.get(cell.verdict) if cell.verdict is not None else None
                text.append("\n" + cell.badge, style=f"bold {style or ''}".strip())
            if cell.detail:
                text.append("\n" + cell.detail, style="dim")
            cells.append(text)
        out.add_row(*cells)
    return out


def frame_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as JSON objects (what pandas cannot encode, as text)."""
    return json.loads(frame.to_json(orient="records", default_handler=str))


def tables_json(tables: Iterable[Table]) -> list[dict[str, Any]]:
    """Each table's title, caption and rows: the `tables` of `--json`."""
    return [{"title": t.title, "caption": t.caption or None, "rows": frame_rows(t.frame)} for t in tables]


def print_written(paths: Iterable[Path]) -> None:
    """The files a report wrote, one a line."""
    console.print("[bold]Wrote[/]")
    for path in paths:
        console.print(f"  {path}", highlight=False, markup=False, soft_wrap=True)
