"""The copy records of an experiment as frames, and the per-tag estimates results.csv carries.

`records` reads every tag's copy_distance.csv (one row per record and window) into one frame with its arm, kind,
variant and seed; `by_seed` pivots one arm and window to records x seeds; `nested_arms` says whose records are
nested across windows (`rlab.evals.copy_distance.task`), and `section_lengths` gives L0 and the continued-training
length as the copy section uses them. `tag_levels` / `tag_retentions` are each tag's own gain and retention (one
seed each) for results.csv (`copy_gain_d<d>`, `copy_retention_d<d>`).
"""

from __future__ import annotations

from typing import cast

import pandas as pd

from rlab.evals.copy_distance.records import CopyDistanceMetric
from rlab.report.copy_distance import retention
from rlab.report.stats import inference as inf


def records(data) -> pd.DataFrame:
    """One row per arm, seed (tag), window and record: control, copy, accuracy and gain."""
    frames = []
    for src in data.sources.tags if data.sources else []:
        df = src.csvs.get("copy_distance")
        if df is None or df.empty or src.tag not in set(data.meta["tag"]):
            continue
        arm = data.arm_of(src.tag)
        frames.append(
            df.assign(
                tag=src.tag, seed=arm.tags.index(src.tag), arm=arm.key, kind=arm.kind, variant=arm.variant
            )
        )
    if not frames:
        return pd.DataFrame()
    recs = pd.concat(frames, ignore_index=True)
    return recs.assign(gain=recs["control_nats"] - recs["copy_nats"])  # what seeing the passage earlier saves


def by_seed(g: pd.DataFrame, column: str = "gain") -> pd.DataFrame:
    """records x seeds of one arm and window (records every seed has)."""
    return g.pivot_table(index="record", columns="seed", values=column, aggfunc="mean").dropna()


def nested_arms(data) -> set[str]:
    """Arms every tag of which scored copy records nested across windows (paired gains across distances)."""
    flags: dict[str, bool] = {}
    for src in data.sources.tags if data.sources else []:
        section = src.section(CopyDistanceMetric)
        if section is None or src.tag not in set(data.meta["tag"]):
            continue
        key = data.arm_of(src.tag).key
        flags[key] = flags.get(key, True) and section.nested
    return {k for k, v in flags.items() if v}


def tag_levels(data) -> pd.DataFrame:
    """Per tag and window (each seed on its own): gain with its studentized interval and record count."""
    recs = records(data)
    rows = []
    for (tag, window, distance), g in recs.groupby(["tag", "window", "distance"]) if len(recs) else []:
        level = inf.level(g.groupby("record")["gain"].mean().to_numpy())
        if level is not None:
            rows.append(
                {
                    "tag": tag,
                    "window": int(cast(int, window)),
                    "distance": int(cast(int, distance)),
                    "gain": level.estimate,
                    "gain_low": level.low,
                    "gain_high": level.high,
                    "n": level.n_units,
                }
            )
    return pd.DataFrame(rows, columns=["tag", "window", "distance", "gain", "gain_low", "gain_high", "n"])


def tag_retentions(data) -> pd.DataFrame:
    """Per tag and window beyond L0 (each seed on its own, nested records only): the retention with its interval."""
    recs = records(data)
    inside = (
        retention.within_window(sorted(set(recs["window"])), section_lengths(data)[0]) if len(recs) else None
    )
    nested = nested_arms(data)
    return retention.per_tag(recs[recs["arm"].isin(nested)] if len(recs) else recs, inside)


def retention_name(distance: int) -> str:
    """The results.csv name of the copy's retention at one distance (``copy_retention_d472``)."""
    return f"copy_retention_d{distance}"


def metric_name(distance: int) -> str:
    """The results.csv name of the copy gain at one distance (``copy_gain_d472``)."""
    return f"copy_gain_d{distance}"


def section_lengths(data) -> tuple[int | None, int | None]:
    """(L0, the continued-training length) as the section uses them."""
    lengths = (
        data.meta.groupby("kind")["train_seq_len"].max() if "train_seq_len" in data.meta else pd.Series()
    )
    base_len = int(lengths["base"]) if "base" in lengths and pd.notna(lengths["base"]) else None
    train_len = (
        int(lengths["continued"]) if "continued" in lengths and pd.notna(lengths["continued"]) else None
    )
    if base_len is None and "rope_original_len" in data.meta:  # no base arm: L0 as every variant records it
        original = data.meta["rope_original_len"].dropna()
        base_len = int(original.max()) if len(original) else None
    return base_len, train_len
