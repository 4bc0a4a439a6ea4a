"""Every estimate of the report with its interval and unit count, per arm and per tag, and the comparisons.

`TagData` is what one tag's eval wrote, reduced to what the statistics need: BPB units with the
document (cluster) each belongs to, CORE outcomes per example, passkey cells. `group_scalars` turns
groups of tags (an arm's seeds, or a single tag) into scalar rows; the comparisons of arms with their reference
are `rlab.report.assemble.arm_comparisons`, which stacks the seeds' units with the helpers here. The statistics are in
`inference`, the units of each eval in `uncertainty`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlab.report.stats import inference as inf
from rlab.report.stats import uncertainty as unc
from rlab.report.stats import verdicts as vd

PRIMARY = "primary_bpb"
"""The primary endpoint: BPB at the lengths of `endpoints.Primary` (the longest extension length, else T)."""
EXTENSION = "extension_bpb"
"""The extension beside the primary endpoint (secondary): BPB beyond the training length minus BPB at it, on
the same targets (`add_extension_units`); lower = the arm keeps more of what it does at the training length."""
PRIMARY_METRICS = (PRIMARY,)
ALPHA = inf.ALPHA
FAMILIES = ("primary", "secondary")
"""The report's two families of table verdicts (the copy section declares a third, `copy`)."""
LOWER_IS_BETTER = {
    "train_bpb": True,
    "val_bpb": True,
    PRIMARY: True,
    EXTENSION: True,
    "core": False,
    "passkey_overall": False,
}
NO_RELATIVE = (EXTENSION,)
"""Differences of differences: a percent of the baseline's (possibly ~0 or negative) extension means nothing."""


def lower_is_better(metric: str) -> bool:
    return LOWER_IS_BETTER.get(metric, metric.startswith("bpb_len_"))


def bpb_metric(metric: str) -> bool:
    return metric.endswith("_bpb") or metric.startswith("bpb_len_")


def units_name(metric: str) -> str:
    """The report's metric name -> bpb_units.csv's (train_bpb -> train, bpb_len_512 -> len_512)."""
    if metric.startswith("bpb_len_"):
        return f"len_{metric[8:]}"
    return metric[: -len("_bpb")]


@dataclass
class TagData:
    """One tag's eval outputs, as the statistics need them."""

    tag: str
    units: dict[str, pd.DataFrame] = field(default_factory=dict)
    """bpb_units.csv metric (train, val, len_<L>, primary) -> frame(unit, nats, bytes, cluster)."""
    clustered: bool = False
    """True when units carry their document (a `doc` column); else each unit is its own cluster."""
    points: dict[str, float] = field(default_factory=dict)
    """Point values from eval.json (used when a metric has no units)."""
    core_examples: pd.DataFrame | None = None
    passkey: pd.DataFrame | None = None
    """length, depth, accuracy, n (keys per cell)."""
    passkey_trials: pd.DataFrame | None = None
    """length, depth, trial, key, correct: one row per key (the unit of a paired passkey test)."""


def units_by_metric(frame: pd.DataFrame | None) -> tuple[dict[str, pd.DataFrame], bool]:
    """bpb_units.csv -> {metric: frame(unit, nats, bytes, cluster)}; cluster = the `doc` column when present."""
    if frame is None or frame.empty:
        return {}, False
    frame = frame.copy()
    frame["metric"] = frame["metric"].astype(str)
    frame["unit"] = frame["unit"].astype(str)
    clustered = "doc" in frame.columns
    frame["cluster"] = frame["doc"].astype(str) if clustered else frame["unit"]
    return (
        {
            str(m): g[["unit", "nats", "bytes", "cluster"]].reset_index(drop=True)
            for m, g in frame.groupby("metric")
        },
        clustered,
    )


def add_extension_units(data: TagData, reference: int, lengths: list[int]) -> None:
    """Units of the extension endpoint: per block, nats at each length minus nats at `reference` (the same
    targets, so the same bytes), pooled over `lengths`; its BPB is the mean of BPB(L) - BPB(reference)."""
    ref = data.units.get(f"len_{reference}")
    if ref is None:
        return
    parts = []
    for length in lengths:
        u = data.units.get(f"len_{length}")
        if u is None:
            return
        joined = u.merge(ref[["unit", "nats", "bytes"]], on="unit", suffixes=("", "_ref"))
        if len(joined) != len(u) or not (joined["bytes"] == joined["bytes_ref"]).all():
            return  # not the same targets at both lengths: no extension estimand from these units
        parts.append(
            joined.assign(unit=f"{length}:" + joined["unit"], nats=joined["nats"] - joined["nats_ref"])[
                ["unit", "nats", "bytes", "cluster"]
            ]
        )
    if parts:
        data.units[units_name(EXTENSION)] = pd.concat(parts, ignore_index=True)


def add_primary_units(data: TagData, lengths: list[int]) -> None:
    """Units of the primary endpoint: the blocks at each primary length, pooled; a block's cluster is its
    document, or (with no document ids) the block itself at both lengths (the same text)."""
    parts = []
    for length in lengths:
        u = data.units.get(f"len_{length}")
        if u is None:
            return
        part = u.copy()
        part["unit"] = f"{length}:" + part["unit"]
        parts.append(part)
    if parts:
        data.units["primary"] = pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------- stacking seeds


def stack_units(datas: list[TagData], metric: str) -> tuple[np.ndarray, np.ndarray, pd.DataFrame] | None:
    """(nats (S, n), bytes (S, n), ids frame(unit, cluster)) over units every seed has; None if any lacks them."""
    frames = [f for d in datas if (f := d.units.get(units_name(metric))) is not None]
    if len(frames) < len(datas):
        return None
    joined = frames[0][["unit", "cluster", "nats", "bytes"]].rename(columns={"nats": "n0", "bytes": "b0"})
    for i, f in enumerate(frames[1:], start=1):
        joined = joined.merge(
            f[["unit", "nats", "bytes"]].rename(columns={"nats": f"n{i}", "bytes": f"b{i}"}), on="unit"
        )
    s = len(frames)
    nats = joined[[f"n{i}" for i in range(s)]].to_numpy(dtype=float).T
    nbytes = joined[[f"b{i}" for i in range(s)]].to_numpy(dtype=float).T
    return nats, nbytes, joined[["unit", "cluster"]]


def stack_core(datas: list[TagData]) -> pd.DataFrame | None:
    """task, index, c0..c{S-1} over examples every seed scored."""
    frames = [f for d in datas if (f := d.core_examples) is not None and not f.empty]
    if len(frames) < len(datas):
        return None
    joined = frames[0][["task", "index", "correct"]].rename(columns={"correct": "c0"})
    for i, f in enumerate(frames[1:], start=1):
        joined = joined.merge(
            f[["task", "index", "correct"]].rename(columns={"correct": f"c{i}"}), on=["task", "index"]
        )
    joined["task"] = joined["task"].astype(str)
    return joined.sort_values(["task", "index"]).reset_index(drop=True)


def core_arrays(joined: pd.DataFrame, prefix: str = "c") -> dict[str, np.ndarray]:
    cols = [c for c in joined.columns if c.startswith(prefix) and c[len(prefix) :].isdigit()]
    return {str(t): g[cols].to_numpy(dtype=float).T for t, g in joined.groupby("task")}


def _passkey_cells(datas: list[TagData]) -> pd.DataFrame | None:
    """length, depth, accuracy (mean over seeds), n (keys per cell) over cells every seed has."""
    frames = [d.passkey for d in datas]
    if any(f is None or f.empty for f in frames):
        return None
    stacked = pd.concat(frames, ignore_index=True)
    cells = (
        stacked.groupby(["length", "depth"])
        .agg(accuracy=("accuracy", "mean"), n=("n", "min"), seeds=("accuracy", "size"))
        .reset_index()
    )
    return cells[cells["seeds"] == len(frames)].drop(columns="seeds")


def passkey_summary(cells: pd.DataFrame, length: int | None = None) -> inf.Comparison | None:
    """Accuracy over the keys of all cells (of one length): Wilson interval, n = keys."""
    part = cells if length is None else cells[cells["length"] == length]
    n = int(part["n"].sum())
    return unc.wilson(float((part["accuracy"] * part["n"]).sum()), n) if n > 0 else None


# ---------------------------------------------------------------- scalars


def _row(metric: str, iv: inf.Comparison | None, value: float = math.nan, how: str = "") -> dict[str, Any]:
    if iv is None:
        return {
            "metric": metric,
            "value": value,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "n_units": pd.NA,
            "n_seeds": pd.NA,
            "interval": how,
        }
    return {
        "metric": metric,
        "value": iv.estimate,
        "ci_low": iv.low,
        "ci_high": iv.high,
        "n_units": iv.n_units,
        "n_seeds": iv.n_seeds,
        "interval": how or "t",
    }


def group_scalars(
    datas: list[TagData], metrics: list[str], core_baselines: dict[str, float]
) -> list[dict[str, Any]]:
    """Every scalar of one group of seed replicates: mean over seeds with a studentized interval (unit noise, and
    seed noise, Satterthwaite's degrees of freedom, when there are several seeds)."""
    rows = []
    for metric in metrics:
        if bpb_metric(metric):
            stacked = stack_units(datas, metric)
            if stacked is not None and stacked[0].shape[1]:
                nats, nbytes, ids = stacked
                rows.append(_row(metric, unc.bpb_interval(nats, nbytes, clusters=ids["cluster"].to_numpy())))
            else:
                vals = [d.points.get(metric, math.nan) for d in datas]
                if not any(math.isnan(v) for v in vals):
                    rows.append(_row(metric, None, float(np.mean(vals)), "eval"))
        elif metric == "core":
            joined = stack_core(datas)
            if joined is not None:
                rows.append(_row(metric, unc.core_interval(core_arrays(joined), core_baselines)))
            else:
                vals = [d.points.get("core", math.nan) for d in datas]
                if not any(math.isnan(v) for v in vals):
                    rows.append(_row(metric, None, float(np.mean(vals)), "eval"))
        elif metric == "passkey_overall":
            cells = _passkey_cells(datas)
            if cells is not None:
                iv = passkey_summary(cells)
                if iv is not None:
                    rows.append({**_row(metric, iv, how="wilson"), "n_seeds": len(datas)})
    return rows


def families(comparisons: pd.DataFrame) -> dict[str, vd.Family]:
    """The declared families of the table verdicts with their sizes (testable comparisons only)."""
    return {
        name: vd.Family(name, int((comparisons["family"] == name).sum()))
        for name in FAMILIES
        if "family" in comparisons
    }
