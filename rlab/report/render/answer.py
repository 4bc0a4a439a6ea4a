"""The report's Answer: one table, one row per arm, the columns a reader decides on, and three short lines.

Columns: the primary verdict (estimate, interval, verdict), BPB at the target length vs the control, the arm's
own gain from the longer context, the short-context cost (BPB at L0 vs the base), the copy kept beyond L0, and
CORE vs the control. Continued arms come first (vs the control, the baseline variant continued alike), zero-shot
arms in their own block (vs the baseline's zero-shot arm). Every number is read from the comparisons the report
already decided (`ReportData.comparisons`, `copy_retention`); nothing is recomputed here. The same `Answer`
renders as a document table (markdown, HTML with verdict badges), a rich table (`rlab report`) and typed JSON
rows (`rlab report --json`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from rlab.report.assemble.report_data import ReportData
from rlab.report.copy_distance.records import section_lengths
from rlab.report.render import document as doc
from rlab.report.render import headline
from rlab.report.render import methods as mth
from rlab.report.render.answer_cells import Column, Estimate, cell, count, holm_only, num
from rlab.report.render.answer_lines import lines
from rlab.report.render.arm_values import comparison, scalar
from rlab.report.render.table_model import arm_order
from rlab.report.sources.arms import reference_arm
from rlab.report.stats import estimates as est
from rlab.report.stats import verdicts as vd
from rlab.report.stats.verdicts import Verdict


@dataclass
class AnswerRow:
    arm: str
    variant: str
    kind: str
    reference: str | None
    """The arm it is compared with (None: it is the reference of its block)."""
    primary: Estimate | None = None
    at_target: Estimate | None = None
    extension: Estimate | None = None
    short_context: Estimate | None = None
    copy_retention: Estimate | None = None
    core: Estimate | None = None


@dataclass
class Answer:
    columns: list[Column]
    rows: list[AnswerRow]
    groups: dict[int, str]
    """Row index -> the heading of the block that starts there."""
    lines: list[doc.Text]
    """The few lines under the table (`answer_lines.lines`): families, seeds, what is missing, a warning."""
    warnings: list[doc.Item] = field(default_factory=list)
    """Every warning and note (the Warnings section below the answer)."""

    def json_rows(self) -> list[dict[str, Any]]:
        return [_clean(asdict(r)) for r in self.rows]


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return None if isinstance(value, float) and math.isnan(value) else value


def _compared(comp: pd.Series | None, relative: bool = False) -> Estimate | None:
    if comp is None or pd.isna(comp["diff"]):
        if comp is not None and comp["verdict"] == Verdict.NOT_COMPARABLE.value:
            return Estimate(None, verdict=Verdict.NOT_COMPARABLE.value)
        return None
    key = "rel_pct" if relative and not pd.isna(comp["rel_pct"]) else "diff"
    lo, hi = ("rel_low", "rel_high") if key == "rel_pct" else ("diff_low", "diff_high")
    mde = comp.get("mde_rel_pct") if key == "rel_pct" else comp.get("mde")
    verdict = Verdict(comp["verdict"])
    return Estimate(
        num(comp[key]),
        num(comp[lo]),
        num(comp[hi]),
        "%" if key == "rel_pct" else "",
        None if verdict is Verdict.NONE else verdict.value,
        num(mde),
        count(comp.get("n_units")),
        seed_limited=vd.row_seed_limited(comp),
        holm_only=holm_only(comp),
    )


def _level(data: ReportData, arm: str, metric: str) -> Estimate | None:
    value, low, high, n = scalar(data, arm, metric)
    if math.isnan(value):
        return None
    return Estimate(value, num(low), num(high), n_units=count(n))


def short_context(data: ReportData, arm: str) -> Estimate | None:
    """How much of its base's BPB at L0 the arm keeps, in % (`rlab.report.estimands.retention`: the base's BPB
    over the arm's, paired by document; 100 = nothing lost at short context)."""
    for row in data.estimands.short_context_retention:
        if row.arm == arm and row.metric == "bpb" and row.versus == "base" and row.keeps_pct is not None:
            return Estimate(row.keeps_pct, row.low_pct, row.high_pct, "%", n_units=row.n_units or None)
    return None


def copy_kept(data: ReportData, arm: str, window: int | None) -> Estimate | None:
    """The arm's retention of the copy at `window` (beyond L0) and its verdict vs the reference."""
    kept = data.copy_retention
    if kept is None or kept.empty or window is None:
        return None
    hit = kept[(kept["arm"] == arm) & (kept["window"] == window)]
    if hit.empty or pd.isna(hit.iloc[0]["retention"]):
        return None
    r = hit.iloc[0]
    verdict = Verdict(r["verdict"]) if isinstance(r["verdict"], str) else Verdict.NONE
    return Estimate(
        float(r["retention"]),
        num(r["retention_low"]),
        num(r["retention_high"]),
        verdict=None if verdict is Verdict.NONE else verdict.value,
        mde=num(r["mde"]),
        n_units=count(r["n"]),
        holm_only=holm_only(r),
        note="" if verdict is not Verdict.NONE or not r["note"] else str(r["note"]),
    )


def _copy_window(data: ReportData, kind: str) -> int | None:
    """The distance the table reports retention at: zero-shot, the first window past L0; continued, the
    training length (the copy section's own choice)."""
    kept = data.copy_retention
    if kept is None or kept.empty:
        return None
    _, train_len = section_lengths(data)
    windows = sorted(set(kept[kept["kind"] == kind]["window"].astype(int)))
    if kind == "continued":
        windows = [w for w in windows if train_len is not None and w >= train_len]
    return windows[0] if windows else None


def _distance(data: ReportData, window: int | None) -> int | None:
    kept = data.copy_retention
    if window is None or kept is None:
        return None
    return int(kept[kept["window"] == window]["distance"].iloc[0])


def title(data: ReportData) -> str:
    """The Answer's heading: what the primary endpoint is."""
    return f"Answer (primary endpoint: {data.primary.description})"


def target_length(data: ReportData) -> int | None:
    """The length the level column reads: the extension's reference (the training length), else the level
    endpoint's first length."""
    if data.primary.reference is not None:
        return data.primary.reference
    return data.primary.lengths[0] if data.primary.lengths else None


def columns(data: ReportData) -> list[Column]:
    b = data.baseline
    target = target_length(data)
    l0, _ = section_lengths(data)
    extension = bool(data.primary.extension)
    longest = max(data.primary.extension) if extension else None
    out = [
        Column(
            "primary",
            f"primary Δ vs {b}",
            f"the primary endpoint ({data.primary.description}), arm minus control, with its interval and "
            "verdict (continued arms: the primary family; zero-shot arms: the secondary family)",
        ),
        Column(
            "at_target",
            f"BPB@{target} vs {b}" if target else f"val BPB vs {b}",
            f"BPB at the target length {target} tokens relative to the control's, in % (negative = better), "
            "with its interval and verdict (secondary family)",
            2,
        ),
    ]
    if extension:
        out.append(
            Column(
                "extension",
                f"BPB {target}→{longest}",
                f"the arm's own extension: its BPB at {longest} minus its BPB at {target} tokens of context on the "
                "same targets (negative = the longer context helps), with its interval; a level, not a test",
            )
        )
    out += [
        Column(
            "short_context",
            f"BPB@{l0} kept vs base",
            f"short-context retention: the base's BPB at L0 = {l0} tokens (its training length) over the arm's on "
            "the same documents, in % (100 = nothing lost at short context, below 100 = worse), with its "
            "interval; a level, not a test (the control comparison at that length is in the BPB tables)",
            1,
            signed=False,
        ),
        Column(
            "copy_retention",
            "copy kept past L0",
            "the arm's gain from a passage seen d tokens back (d beyond L0) over its own gain within L0, on the "
            "same records (1 = keeps all of it), with its interval and its verdict vs the reference's "
            "retention (copy family)",
            2,
            signed=False,
        ),
        Column(
            "core",
            f"CORE vs {b}",
            "DCLM CORE (centered accuracy) minus the control's, with its interval and verdict (secondary family)",
        ),
    ]
    return out


def _unevaluated_reference(data: ReportData, arms: list[str], kind: str) -> str | None:
    """A block's reference before any of its arms has been evaluated (no comparisons to read it from): the
    continued control, or what `sources.arms.reference_arm` compares a zero-shot arm with."""
    if kind == "continued":
        return data.baseline_arm
    if data.baseline_arm is None:
        return "base"
    return reference_arm(data.arm(arms[0]), data.arms, data.arm(data.baseline_arm)).key


def rows(data: ReportData) -> tuple[list[AnswerRow], dict[int, str]]:
    target = target_length(data)
    at_metric = f"bpb_len_{target}" if target else "val_bpb"
    _, train_len = section_lengths(data)
    out: list[AnswerRow] = []
    groups: dict[int, str] = {}
    c = data.comparisons
    for kind in ("continued", "zero-shot"):
        arms = [a for a in arm_order(data) if data.arm(a).kind == kind]
        if not arms:
            continue
        refs = c[(c["kind"] == kind) & c["arm"].isin(arms)]["reference"]
        ref = str(refs.iloc[0]) if len(refs) else _unevaluated_reference(data, arms, kind)
        window = _copy_window(data, kind)
        distance = _distance(data, window)
        where = f" at {train_len}" if kind == "continued" and train_len else " (nothing trained)"
        groups[len(out)] = f"{kind}{where}, vs {ref or data.baseline}" + (
            f", copy at d={distance}" if distance is not None else ""
        )
        arms = ([ref] if ref in arms else []) + [a for a in arms if a != ref]
        for arm in arms:
            is_ref = arm == ref
            out.append(
                AnswerRow(
                    arm,
                    data.arm(arm).variant,
                    kind,
                    None if is_ref else ref,
                    None if is_ref else _compared(comparison(data, arm, _primary_metric(data, kind))),
                    None if is_ref else _compared(comparison(data, arm, at_metric), relative=True),
                    _level(data, arm, est.EXTENSION) if data.primary.extension else None,
                    short_context(data, arm),
                    copy_kept(data, arm, window),
                    None if is_ref else _compared(comparison(data, arm, "core")),
                )
            )
    return out, groups


def _primary_metric(data: ReportData, kind: str) -> str:
    """The primary column's comparison: the primary endpoint for continued arms; for the others BPB at the same
    length (the primary level is compared for continued arms only: `arm_comparisons.compared_on`)."""
    if kind == "continued" or data.primary.metric != est.PRIMARY or len(data.primary.lengths) != 1:
        return data.primary.metric
    return f"bpb_len_{data.primary.lengths[0]}"


def build(data: ReportData, warnings: list[str], notes: list[str]) -> Answer:
    """The Answer of one report: `warnings` are every limit on its verdicts (the first is quoted under the
    table), `notes` what else a reader should know; both go to the Warnings section. A column no arm has a value
    in (an eval nobody ran) is left out."""
    found, groups = rows(data)
    important = [w for w in warnings if w != headline.seed_warning(data)]
    items = [doc.Item(doc.prose(f"Warning: {w}"), "warning") for w in warnings]
    items += [doc.Item(doc.prose(f"Note: {n}"), "note") for n in notes]
    shown = [c for c in columns(data) if any(getattr(r, c.key) is not None for r in found)]
    return Answer(shown, found, groups, lines(data, important), items)


# ---------------------------------------------------------------- rendering


def table(answer: Answer) -> doc.TableBlock:
    """The Answer as a document table: headers link to the Methods section, verdicts as badges."""
    body = []
    for r in answer.rows:
        label = r.variant + (" (control)" if r.reference is None else "")
        cells = [doc.Cell(label, em=r.reference is None)]
        cells += [cell(getattr(r, col.key), col) for col in answer.columns]
        body.append(cells)
    return doc.TableBlock(
        ["arm", *(c.header for c in answer.columns)],
        body,
        groups=dict(answer.groups),
        links={c.header: mth.ANCHOR for c in answer.columns},
    )
