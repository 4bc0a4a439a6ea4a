"""The wide one-row-per-tag frame behind results.csv, and its stable column order.

Value columns are the tag's own (one seed): ``<metric>``, ``_ci_low``, ``_ci_high`` and ``_n_units``
(independent units: documents, examples or keys). Comparison columns are its *arm's* (the mean over
the arm's seeds vs the arm named in ``compared_with``: the baseline arm, or for a zero-shot arm the
baseline's zero-shot arm or the base): ``_diff_vs_<b>``, ``_rel_vs_<b>_pct`` (only where the baseline
is positive), the Holm-adjusted ``_p_holm_vs_<b>`` and ``_verdict_vs_<b>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import pandas as pd

from rlab.evals.core.records import CoreMetric
from rlab.records.results_row import PROVENANCE_COLUMNS
from rlab.report.estimands import EstimandRows
from rlab.report.estimands import wide_cells as estimand_cells
from rlab.report.sources.frames import ROPE_FIELDS
from rlab.report.stats.estimates import NO_RELATIVE, bpb_metric, lower_is_better

if TYPE_CHECKING:
    from rlab.report.assemble.measured import Measured

ID = ("experiment", "tag", "variant", "arm", "kind", "seed", "compared_with")
_TRAINED = ("step", "train_seq_len", "tokens_trained")
RUN = (
    "n_seeds",
    *_TRAINED,
    "last_train_loss",
    *(c for c in PROVENANCE_COLUMNS if c not in (*_TRAINED, "seed")),
)
"""Run facts, then the other provenance columns of `rlab.records.results_row.ResultsRow` (seed is in ID)."""
_METRIC_RE = re.compile(
    r"^(extension_bpb|primary_bpb|train_bpb|val_bpb|core|passkey_overall|bpb_len_(\d+)|passkey_len_(\d+)|copy_gain_d(\d+)|copy_retention_d(\d+))(.*)$"
)
_DETAIL_ORDER = ("", "_ci_low", "_ci_high", "_n_units", "_tasks", "_partial", "_missing_tasks")
_COMPARISON_KINDS = (
    "_diff_vs_",
    "_rel_vs_",
    "_n_units_vs_",
    "_p_holm_vs_",
    "_family_vs_",
    "_verdict_vs_",
    "_mde_vs_",
    "_mde_rel_vs_",
)


ESTIMAND_PREFIXES = ("short_retention_", "effective_length_", "key_bpb_len_")
"""results.csv columns of `rlab.report.estimands`."""
_ESTIMAND_DETAIL = ("", "_censored", "_ci_low", "_ci_high", "_n_units", "_n_targets")


def better_word(metric: str) -> str:
    """The sign convention written into a comparison column's name."""
    return "neg=better" if lower_is_better(metric) else "pos=better"


def _metric_rank(col: str) -> tuple[int, int, str] | None:
    m = _METRIC_RE.match(col)
    if not m:
        return None
    name, len_bpb, len_pk, copy_d, kept_d, rest = m.groups()
    rank = {
        "extension_bpb": (0, 0),
        "primary_bpb": (0, 1),
        "train_bpb": (1, 0),
        "val_bpb": (2, 0),
        "core": (4, 0),
        "passkey_overall": (5, 0),
    }.get(name)
    if rank is None:
        rank = (
            (3, int(len_bpb))
            if len_bpb
            else (6, int(len_pk))
            if len_pk
            else (7, int(copy_d))
            if copy_d
            else (8, int(kept_d))
        )
    return rank[0], rank[1], rest


def column_key(col: str) -> tuple:
    """Sort key giving results.csv its stable column order (whatever subset of columns exists)."""
    if col in ID:
        return (0, ID.index(col))
    if col.startswith("rope_") and col[5:] in ROPE_FIELDS:
        return (1, ROPE_FIELDS.index(col[5:]))
    if col in RUN:
        return (2, RUN.index(col))
    ranked = _metric_rank(col)
    if ranked is not None:
        group, sub, rest = ranked
        if "_vs_" in rest:  # comparison columns come after every value column
            kind = next(
                (i for i, k in enumerate(_COMPARISON_KINDS) if rest.startswith(k)), len(_COMPARISON_KINDS)
            )
            tail = 2 if rest.endswith("_ci_high") else 1 if rest.endswith("_ci_low") else 0
            return (4, group, sub, kind, tail, col)
        detail = _DETAIL_ORDER.index(rest) if rest in _DETAIL_ORDER else len(_DETAIL_ORDER)
        return (3, group, sub, detail, col)
    if col == "notes":
        return (6,)
    if col.startswith(ESTIMAND_PREFIXES):  # an estimand's value, then its interval, counts and comparison
        name = col.split(" (")[0]  # a comparison's "(neg=better)"
        suffix = next((x for x in _ESTIMAND_DETAIL[1:] if name.endswith(x)), "")
        return (5, name[: len(name) - len(suffix)], _ESTIMAND_DETAIL.index(suffix), col)
    return (5, col)


def order_columns(columns: list[str]) -> list[str]:
    return sorted(columns, key=column_key)


def comparison_columns(metric: str, baseline: str) -> dict[str, str]:
    """Names of the comparison columns of one metric vs `baseline` (sign convention in the name)."""
    sign = better_word(metric)
    rel, diff = f"{metric}_rel_vs_{baseline}_pct", f"{metric}_diff_vs_{baseline}"
    return {
        "diff": f"{diff} ({sign})",
        "diff_low": f"{diff}_ci_low",
        "diff_high": f"{diff}_ci_high",
        "rel": f"{rel} ({sign})",
        "rel_low": f"{rel}_ci_low",
        "rel_high": f"{rel}_ci_high",
        "p_holm": f"{metric}_p_holm_vs_{baseline}",
        "verdict": f"{metric}_verdict_vs_{baseline}",
        "family": f"{metric}_family_vs_{baseline}",
        "mde": f"{metric}_mde_vs_{baseline}",
        "mde_rel_pct": f"{metric}_mde_rel_vs_{baseline}_pct",
        "n_units": f"{metric}_n_units_vs_{baseline}",
    }


def _copy_columns(
    data: Measured, cells: pd.DataFrame | None, kept: pd.DataFrame | None, rows: dict[str, dict]
) -> None:
    """Copy gain per distance and, beyond L0, the copy's retention (`copy_retention_d<d>`): each tag's own value,
    interval and records; its arm's paired difference with the reference arm (the baseline variant in the same
    condition), interval, records, Holm p in the copy family, verdict and MDE. No p-value where the comparison is
    untestable (fewer than 20 records, no variation, no copy within L0 to retain)."""
    from rlab.report.copy_distance.records import metric_name, retention_name, tag_levels, tag_retentions  # noqa: PLC0415 - defers torch

    if cells is None or cells.empty:
        return
    for r in tag_levels(data).itertuples(index=False):
        name, row = metric_name(int(cast(int, r.distance))), rows[str(r.tag)]
        row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = r.gain, r.gain_low, r.gain_high
        row[f"{name}_n_units"] = r.n
    for r in tag_retentions(data).itertuples(index=False):
        name, row = retention_name(int(cast(int, r.distance))), rows[str(r.tag)]
        row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = r.retention, r.low, r.high
        row[f"{name}_n_units"] = r.n
    by_arm = {arm.key: arm.tags for arm in data.arms}
    kept = kept if kept is not None else cells.iloc[:0]
    tested = [(metric_name, cells[cells["ref"].notna()]), (retention_name, kept[kept["diff"].notna()])]
    for name_of, frame in tested:
        _copy_comparisons(data, rows, by_arm, name_of, frame)


def _copy_comparisons(
    data: Measured,
    rows: dict[str, dict],
    by_arm: dict[str, list[str]],
    name_of: Callable[[int], str],
    frame: pd.DataFrame,
) -> None:
    """The arm's comparison columns of one copy estimand (level or retention) on each of its tags' rows."""
    for r in frame.itertuples(index=False):
        names = comparison_columns(name_of(int(cast(int, r.distance))), data.baseline)
        values = {
            "diff": r.diff,
            "diff_low": r.diff_low,
            "diff_high": r.diff_high,
            "n_units": r.diff_n,
            "p_holm": r.p_holm,
            "family": "copy" if not pd.isna(cast(float, r.p_holm)) else "",
            "verdict": r.verdict,
            "mde": r.mde,
        }
        for tag in by_arm.get(str(r.arm), []):
            rows[tag]["compared_with"] = rows[tag].get("compared_with") or r.ref
            rows[tag].update({names[k]: v for k, v in values.items()})


def wide_frame(
    data: Measured,
    *,
    copy_cells: pd.DataFrame | None,
    copy_retention: pd.DataFrame | None,
    estimands: EstimandRows,
) -> pd.DataFrame:
    """One row per tag: its run facts, its own estimates, its arm's comparisons, copy and estimand columns."""
    meta = data.meta.drop(columns=["label", "evaluated"])
    rows = {r["tag"]: dict(r) for r in meta.to_dict("records")}
    _tag_columns(data, rows)
    by_arm = {arm.key: arm.tags for arm in data.arms}
    _comparison_columns(data, by_arm, rows)
    _copy_columns(data, copy_cells, copy_retention, rows)
    for arm, cells in estimand_cells(estimands, data.baseline).items():
        for tag in by_arm.get(arm, []):
            rows[tag].update(cells)
    for tag, marks in data.tag_notes.items():
        rows[tag]["notes"] = "; ".join(data.footnotes.items[i - 1] for i in marks)
    frame = pd.DataFrame.from_records(list(rows.values()))
    return _typed(frame[order_columns(list(frame.columns))], data.baseline).reset_index(drop=True)


def _tag_columns(data: Measured, rows: dict[str, dict]) -> None:
    """Each tag's own estimates, its CORE task selection and its passkey accuracy by length."""
    for r in data.tag_scalars.itertuples(index=False):
        row = rows[str(r.tag)]
        row[r.metric] = r.value
        row[f"{r.metric}_ci_low"], row[f"{r.metric}_ci_high"] = r.ci_low, r.ci_high
        row[f"{r.metric}_n_units"] = r.n_units
    for src in data.sources.tags if data.sources else []:
        core = src.section(CoreMetric)
        if core is not None:  # eval.core_tasks: CORE on a subset of the bundle's tasks
            rows[src.tag]["core_tasks"] = ";".join(core.selection) if core.selection is not None else "all"
            rows[src.tag]["core_partial"] = core.partial
            rows[src.tag]["core_missing_tasks"] = ";".join(core.missing_tasks)
    if len(data.passkey):
        by_len = data.passkey.groupby(["tag", "length"], as_index=False)["accuracy"].mean()
        for r in by_len.itertuples(index=False):
            rows[r.tag][f"passkey_len_{r.length}"] = float(r.accuracy)


def _comparison_columns(data: Measured, by_arm: dict[str, list[str]], rows: dict[str, dict]) -> None:
    """Each arm's comparisons with its reference, on every tag of the arm."""
    for r in data.comparisons.itertuples(index=False):
        names = comparison_columns(str(r.metric), data.baseline)
        for tag in by_arm.get(str(r.arm), []):
            row = rows[tag]
            row["compared_with"] = r.reference
            for field in names:
                if field == "mde_rel_pct" and not bpb_metric(str(r.metric)):
                    continue
                if (field.startswith("rel") or field == "mde_rel_pct") and r.metric in NO_RELATIVE:
                    continue  # a difference of differences has no relative change: no empty columns
                row[names[field]] = getattr(r, "rel_pct" if field == "rel" else field)


def _typed(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Counts as nullable integers, text columns as strings ("" for none), core_partial as nullable bool."""
    for col in ("seed", "n_seeds", "step", "train_seq_len", "tokens_trained", "skipped_steps") + tuple(
        c for c in frame.columns if c.endswith("_n_units") or "_n_units_vs_" in c
    ):
        if col in frame:
            frame[col] = frame[col].astype("Int64")
    for col in frame.columns:
        if col.endswith(("_verdict_vs_" + baseline, "_family_vs_" + baseline)) or col in (
            "notes",
            "core_tasks",
            "core_missing_tasks",
            "compared_with",
        ):
            frame[col] = frame[col].fillna("").astype(str)
        if col == "core_partial":
            frame[col] = frame[col].astype("boolean")
    return frame
