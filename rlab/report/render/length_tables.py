"""BPB by context length: each arm's BPB at every length, and its change vs the baseline with the verdict."""

from __future__ import annotations

import math

import pandas as pd

from rlab.report.assemble.report_data import ReportData
from rlab.report.render import methods as mth
from rlab.report.render.arm_values import (
    VerdictRows,
    comparison,
    references_note,
    scalar,
    significant_best,
    train_lengths,
    units_phrase,
    verdict_text,
)
from rlab.report.render.table_model import BLANK, Table, arm_order, change_cell, plus_minus
from rlab.report.stats import inference as inf


def length_header(data: ReportData, length: int) -> str:
    train = train_lengths(data)
    orig = set(data.meta["rope_original_len"].dropna().astype(int))
    tags = [t for t, cond in (("train", length in train), ("L0", length in orig)) if cond]
    return f"{length}" + (f" ({', '.join(tags)})" if tags else "")


def lengths_of(data: ReportData) -> list[int]:
    return sorted(set(data.bpb_length["length"].astype(int))) if len(data.bpb_length) else []


def length_about(data: ReportData) -> str:
    n = units_phrase(data, f"bpb_len_{lengths_of(data)[0]}") if lengths_of(data) else ""
    unit = "documents" if data.clustered else "blocks"
    capped = (
        " A cell marked (capped at N) is a length the arm cannot attend to: its attention windows let it see "
        "at most N tokens back there (eval.attention_windows), so it measures N tokens of context, not L."
        if any(data.context_caps.values())
        else ""
    )
    return (
        f"The same target tokens scored at every context length, each predicted from about L tokens of "
        f"context ({n} {unit}); (train) = continued-training length, (L0) = the base's original length."
        + capped
    )


def _capped(data: ReportData, arm: str, length: int) -> str:
    """` (capped at N)` where the arm's windows cap the context at this length, else ''."""
    cap = data.arm_caps(arm).get(length)
    return "" if cap is None else f" (capped at {cap})"


def length_table(data: ReportData) -> Table:
    """BPB by context length × arm."""
    lengths = lengths_of(data)
    headers = {L: length_header(data, L) for L in lengths}
    order = arm_order(data)
    rows, best = [], set()
    for arm in order:
        row = {"arm": data.label(arm)}
        for L in lengths:
            v, lo, hi, _ = scalar(data, arm, f"bpb_len_{L}")
            row[headers[L]] = plus_minus(v, lo, hi, 3) + (_capped(data, arm, L) if not math.isnan(v) else "")
        rows.append(row)
    for L in lengths:
        best |= significant_best(data, f"bpb_len_{L}", headers[L], order)
    frame = pd.DataFrame(rows, columns=["arm", *headers.values()])
    return Table(
        "BPB vs context length (tokens)",
        frame,
        best,
        "Bold: the lowest BPB at that length, only where it beats every other arm beyond noise (paired "
        "95% intervals of its difference with each excluding 0).",
        about=length_about(data),
    )


def length_change_table(data: ReportData) -> Table:
    """Relative BPB change vs the baseline at each length, with the (Holm-adjusted) verdict."""
    lengths = lengths_of(data)
    headers = {L: length_header(data, L) for L in lengths}
    built = VerdictRows()
    for arm in arm_order(data):
        if not (data.comparisons["arm"] == arm).any():  # the baseline, or the zero-shot arms' reference
            continue
        row = {"arm": data.label(arm)}
        for L in lengths:
            comp = comparison(data, arm, f"bpb_len_{L}")
            if comp is None:
                row[headers[L]] = BLANK
                continue
            word = verdict_text(comp, short=True)
            row[headers[L]] = (
                change_cell(comp["rel_pct"], comp["rel_low"], comp["rel_high"], 2)
                + (f" ({word})" if word else "")
                + _capped(data, arm, L)
            )
            built.mark(headers[L], comp)
        built.rows.append(row)
    frame = pd.DataFrame(built.rows, columns=["arm", *headers.values()])
    return Table(
        f"BPB change vs {data.baseline} by context length (neg=better)",
        frame,
        set(),
        f"≈: within noise ({mth.in_family()}); MDE: the smallest change its test would find with "
        f"{inf.POWER:.0%} power at the family's alpha / m.",
        about=length_about(data)
        + f" Paired difference of each arm minus the baseline in %, {mth.INTERVAL}."
        + references_note(data),
        verdicts=built.verdicts,
    )
