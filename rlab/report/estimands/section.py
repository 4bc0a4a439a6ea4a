"""The estimands' compact report section: one small table per estimand that has rows, arms in table order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from rlab.report.estimands.effective_length import ABSOLUTE, RELATIVE
from rlab.report.estimands.key_tokens import FAMILY, family
from rlab.report.estimands.retention import short_length
from rlab.report.render.table_model import BLANK, Table, arm_order
from rlab.report.render.tables import section
from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd

if TYPE_CHECKING:
    from rlab.report.assemble.report_data import ReportData
    from rlab.report.render import document as doc


def _pivot(data: ReportData, rows: list, column_of, title: str, about: str, caption: str) -> Table | None:
    """Rows of one estimand -> a table: one row per arm, one column per `column_of(row)`, cells `row.cell()`
    (n = units). A column with no estimate anywhere is left out, its reason added to the caption."""
    columns = list(dict.fromkeys(column_of(r) for r in rows))
    empty = {c: {r.note for r in rows if column_of(r) == c} for c in columns}
    empty = {
        c: notes
        for c, notes in empty.items()
        if all(not r.cell() or r.note for r in rows if column_of(r) == c)
    }
    columns = [c for c in columns if c not in empty]
    if not columns:
        return None
    by_arm: dict[str, dict[str, str]] = {}
    for r in rows:
        n = f" (n={r.n_units})" if r.n_units and not r.note else ""
        by_arm.setdefault(r.arm, {})[column_of(r)] = r.cell() + n
    records = [
        {"arm": data.label(arm), **{c: by_arm[arm].get(c, BLANK) for c in columns}}
        for arm in arm_order(data)
        if arm in by_arm
    ]
    left_out = "; ".join(f"{c}: {'; '.join(sorted(n for n in notes if n))}" for c, notes in empty.items())
    caption += f" Not shown: {left_out}." if left_out else ""
    return Table(title, pd.DataFrame(records, columns=["arm", *columns]), set(), caption, about=about)


def retention_table(data: ReportData) -> Table | None:

    L0 = short_length(data)

    def column(r) -> str:
        what = f"BPB at {L0}" if r.metric == "bpb" else "CORE"
        return f"{what} vs {'base' if r.versus == 'base' else r.reference}"

    return _pivot(
        data,
        data.estimands.short_context_retention,
        column,
        "Short-context retention",
        f"How much of the short-context quality each arm keeps: BPB at L0 = {L0} as the reference's BPB over the "
        "arm's (a worse BPB keeps < 100%), CORE as the arm's over the reference's; against the base checkpoint "
        "each seed came from and against the control arm. Paired by document (BPB) and example (CORE).",
        "keeps X% [95% studentized interval, delta method over the paired units], n = units. Levels, no "
        "verdicts: the control comparison's verdict is the BPB-at-length table's.",
    )


def effective_length_table(data: ReportData) -> Table | None:

    def column(r) -> str:
        rule = f">= {ABSOLUTE:g}" if r.threshold == "absolute" else f">= {RELATIVE:.0%} of within L0"
        return f"{r.source.replace('_', ' ')} {rule}"

    return _pivot(
        data,
        data.estimands.effective_length,
        column,
        "Effective context length",
        "The longest evaluated length up to which retrieval accuracy stays at or above the threshold at every "
        f"evaluated length (RULER's {ABSOLUTE:g}, or {RELATIVE:.0%} of the arm's own accuracy within L0).",
        "length [95% bootstrap interval over items; none with fewer than "
        f"{inf.MIN_UNITS} items at a length]; '< L' fails at the shortest evaluated length, '>= L' passes at the "
        "longest; n = items per length.",
    )


def key_token_table(data: ReportData) -> Table | None:

    rows = data.estimands.key_token_bpb
    return _pivot(
        data,
        rows,
        lambda r: f"L={r.length}",
        "Key-token BPB",
        "BPB at each context length on the targets that need long context (LongPPL's key tokens): "
        + (rows[0].selection if rows else "")
        + ". Beside it, the plain BPB-at-length difference on every target, from the table below.",
        f"key-token BPB ± 95% half-width over documents; difference vs the reference arm [95% interval] and its "
        f"verdict ({FAMILY} family, Holm); (plain: the BPB-at-length difference and verdict), n = documents.",
    )


def families(data: ReportData) -> list[vd.Family]:
    """The estimands' own Holm families (key-token BPB's), to be declared with the report's."""

    found = family(data.estimands.key_token_bpb)
    return [found] if found is not None else []


TABLES = (retention_table, effective_length_table, key_token_table)


def sections(data: ReportData) -> list[doc.Section]:
    """The section of every estimand with rows (none when no estimand could be computed)."""

    return [section(t) for build in TABLES if (t := build(data)) is not None]
