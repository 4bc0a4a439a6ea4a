"""Each arm compared with its reference arm, then the verdicts: paired estimates, Holm families and the MDE.

`compare_arms` pairs every arm with its reference arm on shared units (skew-corrected studentized interval and test, or seed
t test, units, seeds) and names the family each comparison would belong to; `adjust` then Holm-adjusts each
family over its testable comparisons only (after `rlab.report.assemble.pairing.block_verdicts` took the not-comparable
ones out), sets the typed verdicts and the MDE at 80% power; `best_arm` names the arm that beats every other
beyond noise on a metric. The per-tag units and the scalar estimates they start from are `rlab.report.stats.estimates`.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rlab.report.sources.arms import Arm
from rlab.report.stats import inference as inf
from rlab.report.stats import uncertainty as unc
from rlab.report.stats import verdicts as vd
from rlab.report.stats.estimates import (
    FAMILIES,
    NO_RELATIVE,
    PRIMARY_METRICS,
    TagData,
    bpb_metric,
    core_arrays,
    lower_is_better,
    stack_core,
    stack_units,
)
from rlab.report.stats.verdicts import Verdict

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
    "seed_df",
    "skew",
    "p_value",
    "method",
    "n_units",
    "n_seeds",
    "interval",
    "family",
    "verdict",
]
"""A comparison row before `adjust` (which adds family_size, p_holm, mde, mde_rel_pct and seed_limited)."""

_FIELD_OF_COLUMN = {
    "diff": "estimate",
    "diff_low": "low",
    "diff_high": "high",
    "se": "se",
    "df": "df",
    "unit_var": "unit_var",
    "seed_var": "seed_var",
    "seed_df": "seed_df",
}
"""The row's columns that hold an `inf.Comparison` field as it is (column -> field): `compare_arms` writes
them, `adjust` reads the comparison back from them."""


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
        sa, sb = stack_units(a, metric), stack_units(b, metric)
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
        ja, jb = stack_core(a), stack_core(b)
        if ja is None or jb is None:
            return None
        jb = jb.rename(columns={c: f"d{c[1:]}" for c in jb.columns if c.startswith("c") and c[1:].isdigit()})
        joined = ja.merge(jb, on=["task", "index"])
        if joined.empty:
            return None
        ca, cb = core_arrays(joined, "c"), core_arrays(joined, "d")
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


def family_of(metric: str, kind: str) -> str:
    """The family a comparison of `metric` between arms of `kind` is tested in (before its test decides whether
    it enters it): the primary endpoint of continued arms is primary, everything else secondary."""
    return "primary" if metric in PRIMARY_METRICS and kind == "continued" else "secondary"


def compared_on(metric: str, kind: str) -> bool:
    """Whether arms of `kind` are compared on `metric`: the primary level only for continued arms (for the others
    it is BPB at that length again, already in the secondary family)."""
    return metric not in PRIMARY_METRICS or kind == "continued"


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
            if metric not in theirs.index or not compared_on(metric, arm.kind):
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
                "family": family_of(metric, arm.kind),
                "verdict": Verdict.NONE,
            }
            if got is not None:
                diff = got.diff
                row.update(
                    {column: getattr(diff, name) for column, name in _FIELD_OF_COLUMN.items()},
                    skew=diff.skew,
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
        if got is None or vd.decide(got.diff, got.diff.p_value, lower) not in (Verdict.BETTER,):
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
    frame["seed_limited"] = False
    tests = {i: _as_comparison(r) for i, r in frame.iterrows()}
    blocked = frame["verdict"] == Verdict.NOT_COMPARABLE
    for name in FAMILIES:
        idx = [i for i in frame.index[(frame["family"] == name) & ~blocked]]
        family, adjusted, verdicts = vd.decide_family(
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
            frame.at[i, "seed_limited"] = test.seed_limited(family.mde_alpha)
            ref = frame.at[i, "ref_value"]
            if bpb_metric(frame.at[i, "metric"]) and frame.at[i, "metric"] not in NO_RELATIVE and ref > 0:
                frame.at[i, "mde_rel_pct"] = 100.0 * mde / ref
    frame.loc[frame["p_holm"].isna(), "family"] = ""
    return frame


def _as_comparison(r: pd.Series) -> inf.Comparison | None:
    if pd.isna(r["diff"]) or pd.isna(r["n_units"]):  # no units: a difference of point values, no test
        return None
    as_is: dict[str, Any] = {name: float(r[column]) for column, name in _FIELD_OF_COLUMN.items()}
    return inf.Comparison(
        **as_is,
        p_value=None if pd.isna(r["p_value"]) else float(r["p_value"]),
        n_units=int(r["n_units"]),
        n_seeds=int(r["n_seeds"]) if not pd.isna(r["n_seeds"]) else 1,
        skew=0.0 if pd.isna(r["skew"]) else float(r["skew"]),
    )
