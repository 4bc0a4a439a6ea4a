"""Every estimate of the report with its interval and unit count, per arm and per tag, and the comparisons.

`TagData` is what one tag's eval wrote, reduced to what the statistics need: BPB units with the
document (cluster) each belongs to, CORE outcomes per example, passkey cells. `estimate_groups` turns
groups of tags (an arm's seeds, or a single tag) into scalar rows; `compare_arms` pairs every arm with
the baseline arm on shared units and attaches bootstrap p-values, the multiplicity family (the one
primary endpoint, or secondary) and Holm-adjusted verdicts. The statistics are in `uncertainty`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlab.report import uncertainty as unc
from rlab.report.arms import Arm

PRIMARY = "primary_bpb"
"""The metric name of the primary endpoint (see `primary_lengths`)."""
ALPHA = 1.0 - unc.DEFAULT_LEVEL
LOWER_IS_BETTER = {"train_bpb": True, "val_bpb": True, PRIMARY: True, "core": False, "passkey_overall": False}


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


def _stack_units(datas: list[TagData], metric: str) -> tuple[np.ndarray, np.ndarray, pd.DataFrame] | None:
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


def _stack_core(datas: list[TagData]) -> pd.DataFrame | None:
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


def _core_arrays(joined: pd.DataFrame, prefix: str = "c") -> dict[str, np.ndarray]:
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


def passkey_summary(cells: pd.DataFrame, length: int | None = None) -> unc.Interval | None:
    """Accuracy over the keys of all cells (of one length): Wilson interval, n = keys."""
    part = cells if length is None else cells[cells["length"] == length]
    n = int(part["n"].sum())
    return unc.wilson(float((part["accuracy"] * part["n"]).sum()), n) if n > 0 else None


# ---------------------------------------------------------------- scalars


def _row(metric: str, iv: unc.Interval | None, value: float = math.nan, how: str = "") -> dict[str, Any]:
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
    low, high = (math.nan, math.nan) if _degenerate(iv.n_units, iv.n_seeds) else (iv.low, iv.high)
    return {
        "metric": metric,
        "value": iv.estimate,
        "ci_low": low,
        "ci_high": high,
        "n_units": iv.n_units,
        "n_seeds": iv.n_seeds,
        "interval": how or "bootstrap",
    }


def _degenerate(n_units: int | None, n_seeds: int | None) -> bool:
    """One unit of one seed: every resample is the same, so a bootstrap interval of zero width means nothing."""
    return (n_units or 0) < 2 and (n_seeds or 1) < 2


def group_scalars(
    datas: list[TagData],
    metrics: list[str],
    core_baselines: dict[str, float],
    key: str,
    seed: int,
    n_boot: int,
) -> list[dict[str, Any]]:
    """Every scalar of one group of seed replicates: mean over seeds with a two-level bootstrap interval."""
    rows = []
    for metric in metrics:
        if bpb_metric(metric):
            stacked = _stack_units(datas, metric)
            if stacked is not None and stacked[0].shape[1]:
                nats, nbytes, ids = stacked
                iv = unc.bpb_interval(
                    nats,
                    nbytes,
                    clusters=ids["cluster"].to_numpy(),
                    key=f"{key}/{metric}",
                    seed=seed,
                    n_boot=n_boot,
                )
                rows.append(_row(metric, iv))
            else:
                vals = [d.points.get(metric, math.nan) for d in datas]
                if not any(math.isnan(v) for v in vals):
                    rows.append(_row(metric, None, float(np.mean(vals)), "eval"))
        elif metric == "core":
            joined = _stack_core(datas)
            if joined is not None:
                iv = unc.core_interval(
                    _core_arrays(joined), core_baselines, key=f"{key}/core", seed=seed, n_boot=n_boot
                )
                rows.append(_row(metric, iv))
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


# ---------------------------------------------------------------- comparisons


def _paired(
    a: list[TagData],
    b: list[TagData],
    metric: str,
    baselines: dict[str, float],
    key: str,
    seed: int,
    n_boot: int,
) -> unc.PairedDiff | unc.Interval | None:
    if bpb_metric(metric):
        sa, sb = _stack_units(a, metric), _stack_units(b, metric)
        if sa is None or sb is None:
            return None
        ids_b = sb[2].reset_index().rename(columns={"index": "pos_b"})
        ids = (
            sa[2].reset_index().rename(columns={"index": "pos_a"}).merge(ids_b[["unit", "pos_b"]], on="unit")
        )
        if ids.empty:
            return None
        pa, pb = ids["pos_a"].to_numpy(), ids["pos_b"].to_numpy()
        return unc.bpb_paired_diff(
            sa[0][:, pa],
            sa[1][:, pa],
            sb[0][:, pb],
            sb[1][:, pb],
            key=key,
            clusters=ids["cluster"].to_numpy(),
            seed=seed,
            n_boot=n_boot,
        )
    if metric == "core":
        ja, jb = _stack_core(a), _stack_core(b)
        if ja is None or jb is None:
            return None
        jb = jb.rename(columns={c: f"d{c[1:]}" for c in jb.columns if c.startswith("c") and c[1:].isdigit()})
        joined = ja.merge(jb, on=["task", "index"])
        if joined.empty:
            return None
        ca, cb = _core_arrays(joined, "c"), _core_arrays(joined, "d")
        return unc.core_paired_diff(
            {t: (ca[t], cb[t]) for t in ca}, baselines, key=key, seed=seed, n_boot=n_boot
        )
    if metric == "passkey_overall":
        pa, pb = _passkey_cells(a), _passkey_cells(b)
        if pa is None or pb is None:
            return None
        cells = pa.merge(pb, on=["length", "depth"], suffixes=("_a", "_b"))
        ka, kb = (
            float((cells["accuracy_a"] * cells["n_a"]).sum()),
            float((cells["accuracy_b"] * cells["n_b"]).sum()),
        )
        return unc.proportion_diff(ka, int(cells["n_a"].sum()), kb, int(cells["n_b"].sum()))
    return None


def compare_arms(
    arms: list[Arm],
    refs: dict[str, Arm],
    data: dict[str, TagData],
    scalars: pd.DataFrame,
    baselines: dict[str, float],
    seed: int,
    n_boot: int,
    skip: set[tuple[str, str]] | frozenset = frozenset(),
) -> pd.DataFrame:
    """One row per (arm, metric) both the arm and its reference have (`refs`: in one experiment the baseline arm;
    for a zero-shot arm the baseline's zero-shot arm or the base, see `reference_arm`): the paired difference, its
    p-value, its family (primary: continued arms on the primary endpoint; secondary: the rest), the
    Holm-adjusted p within the family, and the verdict. An (arm, metric) in `skip` gets a row with no estimate
    (its units are not comparable), which stays out of the Holm families."""
    rows = []
    for arm in arms:
        ref = refs.get(arm.key)
        if ref is None or arm.key == ref.key:
            continue
        theirs = scalars[scalars["arm"] == ref.key].set_index("metric")
        mine = scalars[scalars["arm"] == arm.key].set_index("metric")
        for metric in mine.index:
            if metric not in theirs.index:
                continue
            key = f"{arm.key}-vs-{ref.key}/{metric}"
            unpaired = (arm.key, metric) in skip
            got = (
                None
                if unpaired
                else _paired(
                    [data[t] for t in arm.tags],
                    [data[t] for t in ref.tags],
                    metric,
                    baselines,
                    key,
                    seed,
                    n_boot,
                )
            )
            a, b = float(mine.loc[metric, "value"]), float(theirs.loc[metric, "value"])
            row = {
                "arm": arm.key,
                "reference": ref.key,
                "variant": arm.variant,
                "kind": arm.kind,
                "metric": metric,
                "diff": math.nan if unpaired else a - b,
                "diff_low": math.nan,
                "diff_high": math.nan,
                "rel_pct": math.nan,
                "rel_low": math.nan,
                "rel_high": math.nan,
                "p_value": math.nan,
                "n_units": pd.NA,
                "n_seeds": arm.n_seeds,
                "interval": "",
                "family": "primary" if metric == PRIMARY and arm.kind == "continued" else "secondary",
            }
            diff = got.diff if isinstance(got, unc.PairedDiff) else got
            if diff is not None:
                row.update(
                    diff=diff.estimate,
                    diff_low=diff.low,
                    diff_high=diff.high,
                    p_value=diff.p_value,
                    n_units=diff.n_units,
                    n_seeds=min(arm.n_seeds, ref.n_seeds),
                    interval="paired" if isinstance(got, unc.PairedDiff) else "newcombe",
                )
                if isinstance(got, unc.PairedDiff) and _degenerate(diff.n_units, row["n_seeds"]):
                    row.update(diff_low=math.nan, diff_high=math.nan)
            rel = got.rel_pct if isinstance(got, unc.PairedDiff) else None
            if rel is not None:
                row.update(rel_pct=rel.estimate, rel_low=rel.low, rel_high=rel.high)
                if math.isnan(row["diff_low"]):
                    row.update(rel_low=math.nan, rel_high=math.nan)
            elif b > 0 and not isinstance(got, unc.PairedDiff) and diff is not None:
                row.update(rel_pct=(a / b - 1) * 100)
            rows.append(row)
    frame = pd.DataFrame.from_records(
        rows,
        columns=[
            "arm",
            "reference",
            "variant",
            "kind",
            "metric",
            "diff",
            "diff_low",
            "diff_high",
            "rel_pct",
            "rel_low",
            "rel_high",
            "p_value",
            "n_units",
            "n_seeds",
            "interval",
            "family",
        ],
    )
    return adjust(frame)


def best_arm(
    arms: list[Arm],
    data: dict[str, TagData],
    scalars: pd.DataFrame,
    metric: str,
    baselines: dict[str, float],
    seed: int,
    n_boot: int,
) -> str | None:
    """The arm with the best value of `metric` when it beats every other arm beyond noise, else None.

    "Beats every other" is an intersection-union test: each paired difference of the best arm with
    another arm must exclude 0 at 95% on at least `MIN_UNITS` units, which keeps the claim at 5% without
    a correction. The runner-up is tried first (it is the one most likely to tie).
    """
    part = scalars[(scalars["metric"] == metric) & scalars["value"].notna()]
    values = {r.arm: float(r.value) for r in part.itertuples(index=False)}
    if len(values) < 2:
        return None
    lower = lower_is_better(metric)
    ranked = sorted(values, key=lambda k: values[k] if lower else -values[k])
    best = ranked[0]
    if values[ranked[1]] == values[best]:
        return None
    tags = {a.key: a.tags for a in arms}
    for other in ranked[1:]:
        got = _paired(
            [data[t] for t in tags[best]],
            [data[t] for t in tags[other]],
            metric,
            baselines,
            f"best:{best}-vs-{other}/{metric}",
            seed,
            n_boot,
        )
        diff = got.diff if isinstance(got, unc.PairedDiff) else got
        if diff is None or unc.too_few(diff.n_units) or not (diff.high < 0 if lower else diff.low > 0):
            return None
    return best


def adjust(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Holm-adjusted p per family, and the verdict that follows from it (and from the unit count)."""
    frame = comparisons.copy()
    frame["p_holm"] = math.nan
    for _, part in frame.groupby("family"):
        frame.loc[part.index, "p_holm"] = unc.holm(part["p_value"].tolist())
    verdicts = []
    for r in frame.itertuples(index=False):
        n = None if pd.isna(r.n_units) else int(r.n_units)
        iv = unc.Interval(r.diff, r.diff_low, r.diff_high, n_units=n or 0)
        significant = None if math.isnan(r.p_holm) else bool(r.p_holm <= ALPHA and iv.excludes_zero())
        verdicts.append(unc.verdict(iv, lower_is_better(r.metric), significant=significant))
    frame["verdict"] = verdicts
    return frame
