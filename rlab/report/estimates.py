"""Every estimate of the report with its interval and unit count, per arm and per tag, and the comparisons.

`TagData` is what one tag's eval wrote, reduced to what the statistics need: BPB units with the
document (cluster) each belongs to, CORE outcomes per example, passkey cells. `estimate_groups` turns
groups of tags (an arm's seeds, or a single tag) into scalar rows; `compare_arms` pairs every arm with
its reference arm on shared units (studentized interval, sign-flip or seed t test, units, seeds) and names the
family each comparison would belong to; `adjust` then Holm-adjusts each family over its testable comparisons
only (after `rlab.report.collect.block_verdicts` took the not-comparable ones out), sets the typed verdicts and
the MDE at 80% power. The statistics are in `inference`, the units of each eval in `uncertainty`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlab.report import inference as inf
from rlab.report import uncertainty as unc
from rlab.report.arms import Arm
from rlab.report.inference import Verdict

PRIMARY = "primary_bpb"
"""The level primary endpoint: BPB at the lengths of `endpoints.Primary` (where no extension can be measured)."""
EXTENSION = "extension_bpb"
"""The extension primary endpoint: BPB beyond the training length minus BPB at it, on the same targets
(`add_extension_units`); lower = the arm keeps more of what it does at the training length."""
PRIMARY_METRICS = (PRIMARY, EXTENSION)
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
    seed noise with S - 1 degrees of freedom when there are several seeds)."""
    rows = []
    for metric in metrics:
        if bpb_metric(metric):
            stacked = _stack_units(datas, metric)
            if stacked is not None and stacked[0].shape[1]:
                nats, nbytes, ids = stacked
                rows.append(_row(metric, unc.bpb_interval(nats, nbytes, clusters=ids["cluster"].to_numpy())))
            else:
                vals = [d.points.get(metric, math.nan) for d in datas]
                if not any(math.isnan(v) for v in vals):
                    rows.append(_row(metric, None, float(np.mean(vals)), "eval"))
        elif metric == "core":
            joined = _stack_core(datas)
            if joined is not None:
                rows.append(_row(metric, unc.core_interval(_core_arrays(joined), core_baselines)))
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

COMPARISON_COLUMNS = [
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
    "ref_value",
    "se",
    "df",
    "unit_var",
    "seed_var",
    "p_value",
    "method",
    "n_units",
    "n_seeds",
    "interval",
    "family",
    "verdict",
]
"""A comparison row before `adjust` (which adds family_size, p_holm, mde and mde_rel_pct)."""


def _stack_trials(datas: list[TagData]) -> pd.DataFrame | None:
    """length, depth, trial, key, k0..k{S-1} (correct per seed) over trials every seed ran with the same key."""
    frames = [f for d in datas if (f := d.passkey_trials) is not None and not f.empty]
    if len(frames) < len(datas):
        return None
    on = ["length", "depth", "trial", "key"]
    joined = frames[0][[*on, "correct"]].rename(columns={"correct": "k0"})
    for i, f in enumerate(frames[1:], start=1):
        joined = joined.merge(f[[*on, "correct"]].rename(columns={"correct": f"k{i}"}), on=on)
    return joined.sort_values(on).reset_index(drop=True)


def _paired(
    a: list[TagData],
    b: list[TagData],
    metric: str,
    baselines: dict[str, float],
    key: str,
    seed: int,
    draws: int,
) -> unc.PairedDiff | None:
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
            draws=draws,
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
            {t: (ca[t], cb[t]) for t in ca}, baselines, key=key, seed=seed, draws=draws
        )
    if metric == "passkey_overall":
        ta, tb = _stack_trials(a), _stack_trials(b)
        if ta is None or tb is None:
            return None
        tb = tb.rename(columns={c: f"m{c[1:]}" for c in tb.columns if c.startswith("k") and c[1:].isdigit()})
        joined = ta.merge(tb, on=["length", "depth", "trial", "key"])
        if joined.empty:
            return None
        ka = joined[[c for c in joined.columns if c.startswith("k") and c[1:].isdigit()]].to_numpy(float).T
        kb = joined[[c for c in joined.columns if c.startswith("m") and c[1:].isdigit()]].to_numpy(float).T
        return unc.passkey_paired_diff(
            ka, kb, joined["key"].astype(str).to_numpy(), key=key, seed=seed, draws=draws
        )
    return None


def _family_of(metric: str, kind: str) -> str:
    return "primary" if metric in PRIMARY_METRICS and kind == "continued" else "secondary"


def compare_arms(
    arms: list[Arm],
    refs: dict[str, Arm],
    data: dict[str, TagData],
    scalars: pd.DataFrame,
    baselines: dict[str, float],
    seed: int,
    draws: int,
    skip: set[tuple[str, str]] | frozenset = frozenset(),
) -> pd.DataFrame:
    """One row per (arm, metric) both the arm and its reference have (`refs`: in one experiment the baseline arm;
    for a zero-shot arm the baseline's zero-shot arm or the base, see `reference_arm`): the paired difference with
    its studentized interval and test (p None where untestable), and the family it belongs to (primary: continued
    arms on the primary endpoint; secondary: the rest). An (arm, metric) in `skip` gets a row with no estimate (its
    units are not comparable). Verdicts come from `adjust`, after the not-comparable rows are marked."""
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
                    draws,
                )
            )
            a, b = float(mine.loc[metric, "value"]), float(theirs.loc[metric, "value"])
            row = dict.fromkeys(COMPARISON_COLUMNS, math.nan) | {
                "arm": arm.key,
                "reference": ref.key,
                "variant": arm.variant,
                "kind": arm.kind,
                "metric": metric,
                "diff": math.nan if unpaired else a - b,
                "ref_value": b,
                "method": "",
                "n_units": pd.NA,
                "n_seeds": min(arm.n_seeds, ref.n_seeds),
                "interval": "",
                "family": _family_of(metric, arm.kind),
                "verdict": Verdict.NONE,
            }
            if got is not None:
                diff = got.diff
                row.update(
                    diff=diff.estimate,
                    diff_low=diff.low,
                    diff_high=diff.high,
                    se=diff.se,
                    df=diff.df,
                    unit_var=diff.unit_var,
                    seed_var=diff.seed_var,
                    p_value=math.nan if diff.p_value is None else diff.p_value,
                    method=diff.method if diff.testable else (diff.reason or ""),
                    n_units=diff.n_units,
                    n_seeds=diff.n_seeds,
                    interval="t",
                )
                if got.rel_pct is not None and metric not in NO_RELATIVE:
                    row.update(rel_pct=got.rel_pct[0], rel_low=got.rel_pct[1], rel_high=got.rel_pct[2])
            rows.append(row)
    return pd.DataFrame.from_records(rows, columns=COMPARISON_COLUMNS)


def best_arm(
    arms: list[Arm],
    data: dict[str, TagData],
    scalars: pd.DataFrame,
    metric: str,
    baselines: dict[str, float],
    seed: int,
    draws: int,
) -> str | None:
    """The arm with the best value of `metric` when it beats every other arm beyond noise, else None.

    "Beats every other" is an intersection-union test: each paired test of the best arm with another arm must
    reject at 5% on at least `MIN_UNITS` units with its 95% interval excluding 0, which keeps the claim at 5%
    without a correction. The runner-up is tried first (it is the one most likely to tie).
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
            draws,
        )
        if got is None or inf.decide(got.diff, got.diff.p_value, lower) not in (Verdict.BETTER,):
            return None
    return best


def adjust(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Holm within each family over its testable comparisons, the typed verdicts, and the MDE at 80% power.

    A row already `NOT_COMPARABLE`, too few units or untestable enters no family (its `family` is cleared). The
    MDE is quoted at alpha / m of its family (Holm's strictest step), in the metric's units and, where the
    reference value is positive, in percent of it."""
    frame = comparisons.copy()
    frame["family_size"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    frame["p_holm"] = math.nan
    frame["mde"] = math.nan
    frame["mde_rel_pct"] = math.nan
    tests = {i: _as_comparison(r) for i, r in frame.iterrows()}
    blocked = frame["verdict"] == Verdict.NOT_COMPARABLE
    for name in FAMILIES:
        idx = [i for i in frame.index[(frame["family"] == name) & ~blocked]]
        family, adjusted, verdicts = inf.decide_family(
            name, [tests[i] for i in idx], [lower_is_better(frame.at[i, "metric"]) for i in idx]
        )
        for i, p, v in zip(idx, adjusted, verdicts, strict=True):
            frame.at[i, "verdict"] = v
            test = tests[i]
            if p is None or test is None:
                continue
            frame.at[i, "p_holm"] = p
            frame.at[i, "family_size"] = family.size
            frame.at[i, "mde"] = mde = test.mde(family.mde_alpha)
            ref = frame.at[i, "ref_value"]
            if bpb_metric(frame.at[i, "metric"]) and frame.at[i, "metric"] not in NO_RELATIVE and ref > 0:
                frame.at[i, "mde_rel_pct"] = 100.0 * mde / ref
    frame.loc[frame["p_holm"].isna(), "family"] = ""
    return frame


def _as_comparison(r: pd.Series) -> inf.Comparison | None:
    if pd.isna(r["diff"]) or pd.isna(r["n_units"]):  # no units: a difference of point values, no test
        return None
    return inf.Comparison(
        float(r["diff"]),
        float(r["diff_low"]),
        float(r["diff_high"]),
        float(r["se"]),
        float(r["df"]),
        None if pd.isna(r["p_value"]) else float(r["p_value"]),
        0 if pd.isna(r["n_units"]) else int(r["n_units"]),
        int(r["n_seeds"]) if not pd.isna(r["n_seeds"]) else 1,
    )


def families(comparisons: pd.DataFrame) -> dict[str, inf.Family]:
    """The declared families of the table verdicts with their sizes (testable comparisons only)."""
    return {
        name: inf.Family(name, int((comparisons["family"] == name).sum()))
        for name in FAMILIES
        if "family" in comparisons
    }
