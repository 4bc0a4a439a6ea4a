"""Short-context retention: how much of its base's quality within L0 an extended arm keeps ("keeps 98.7% [...]").

LongRoPE2 reports the share of the short-context score an extended model keeps; the study behind this project
kept 96.8% of CORE with YaRN, with no error bar. Here, per continued and zero-shot arm:

* **BPB at L0** (the base's training length, `bpb_len_<L0>`): ``keeps = BPB(base) / BPB(arm)`` on the same
  targets, so a worse (higher) BPB keeps less than 100%. Units: documents (blocks summed per document).
* **CORE** where evaluated: ``keeps = CORE(arm) / CORE(base)`` on the examples both scored, stratified by task;
  only where the base's CORE is clearly above chance (its 95% lower bound > 0), else a ratio means nothing.

Each ratio of sums is linearised per unit (`ratio.influence`) and goes through the report's own paired inference
(`ratio.paired_ratio`: the report's paired interval, `inference.compare` of the influence values against 1,
and its paired test of the raw per-unit differences; seeds as the replicate). The base
is the checkpoint each seed came from (its lineage), else the experiment's base arm. The same ratio against the
**control arm** (the baseline variant continued alike) says what the RoPE change costs beyond training alone.
Levels with intervals: no Holm family of their own (the control comparison's null, equal BPB at L0, is the
secondary family's `bpb_len_<L0>` comparison, which carries its verdict).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from rlab.report.estimands.arm_row import ArmRow
from rlab.report.estimands.ratio import paired_ratio
from rlab.report.sources import frames as fr
from rlab.report.sources.arms import Arm, base_of
from rlab.report.stats import estimates as est
from rlab.report.stats import inference as inf
from rlab.report.stats.uncertainty import _core_values

if TYPE_CHECKING:
    from rlab.report.assemble.measured import Measured

NAME = "short_context_retention"
PREFIX = "short_retention"


class RetentionRow(ArmRow):
    """One arm's short-context retention on one metric against one reference (the base or the control)."""

    metric: Literal["bpb", "core"]
    versus: Literal["base", "control"]
    reference: str
    """The arm (or, for the base, its tags' arm) the ratio is taken against."""
    length: int | None = None
    """L0: the length BPB is measured at (None for CORE)."""
    keeps_pct: float | None = None
    low_pct: float | None = None
    high_pct: float | None = None
    """95% interval of `keeps_pct` (studentized, delta method)."""
    p_value: float | None = None
    """The report's paired test of "keeps 100%" (unadjusted; None where untestable)."""
    n_units: int = 0
    """Documents (BPB) or examples (CORE) both sides scored."""
    n_seeds: int = 1
    note: str = ""
    """Why there is no estimate ('' when there is one)."""

    def column(self, baseline: str) -> str:
        """The results.csv column: ``short_retention_bpb_pct`` (of the base: retention's own reference), and
        ``short_retention_bpb_vs_<baseline>_pct`` against the control."""
        return f"{PREFIX}_{self.metric}" + ("" if self.versus == "base" else f"_vs_{baseline}") + "_pct"

    def cell(self) -> str:
        """``98.7% [97.9, 99.5]`` (or the note)."""
        if self.keeps_pct is None:
            return self.note
        if self.low_pct is None or self.high_pct is None:
            return f"{self.keeps_pct:.1f}%"
        return f"{self.keeps_pct:.1f}% [{self.low_pct:.1f}, {self.high_pct:.1f}]"


def short_length(data: Measured) -> int | None:
    """L0: the base's training length (the base tag's), else the arms' RoPE original length."""
    base = data.meta[data.meta["kind"] == "base"]["train_seq_len"]
    for values in (base, data.meta["rope_original_len"]):
        known = pd.to_numeric(values, errors="coerce").dropna()
        if len(known):
            return int(known.iloc[0])
    return None


def _bpb_docs(data: Measured, tags: list[str], length: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Per tag, nats summed per document over the targets every tag scored at `length`: ((k, docs), bytes)."""
    by_tag = {s.tag: s for s in data.sources.tags} if data.sources else {}
    frames = []
    for tag in tags:
        units, _ = est.units_by_metric(by_tag[tag].csvs.get("bpb_units") if tag in by_tag else None)
        frame = units.get(f"len_{length}")
        if frame is None or frame.empty:
            return None
        frames.append(frame.set_index("unit"))
    common = frames[0].index
    for f in frames[1:]:
        common = common.intersection(f.index)
    if not len(common):
        return None
    cluster = frames[0].loc[common, "cluster"]
    nats = np.vstack([f.loc[common, "nats"].groupby(cluster).sum().to_numpy() for f in frames])
    nbytes = frames[0].loc[common, "bytes"].groupby(cluster).sum().to_numpy(dtype=float)
    return nats.astype(float), nbytes


def _core_units(data: Measured, tags: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Per tag, the per-example values whose mean is CORE over the examples every tag scored, and each
    example's task (the stratum)."""
    by_tag = {s.tag: s for s in data.sources.tags} if data.sources else {}
    frames = [by_tag[t].csvs.get("core_examples") if t in by_tag else None for t in tags]
    if any(f is None or f.empty for f in frames) or data.core_tasks.empty:
        return None
    joined = est.stack_core([est.TagData(tag=t, core_examples=f) for t, f in zip(tags, frames, strict=True)])
    if joined is None or joined.empty:
        return None
    baselines = fr.task_baselines(data.core_tasks.drop_duplicates("task"))
    values, strata = _core_values(est.core_arrays(joined), baselines)
    return values, strata


def _bases(data: Measured, arm: Arm) -> list[str] | None:
    """The base tag of each of the arm's seeds: its lineage's parent where evaluated, else the base arm's."""
    evaluated = {s.tag: s for s in data.sources.tags} if data.sources else {}
    base_arm = next((a for a in data.arms if a.kind == "base" and a.group == arm.group), None)
    out = []
    for i, tag in enumerate(arm.tags):
        parent = base_of(evaluated[tag]) if tag in evaluated else None
        if parent in evaluated:
            out.append(parent)
        elif base_arm is not None:
            out.append(base_arm.tags[min(i, len(base_arm.tags) - 1)])
        else:
            return None
    return out


def _row(arm: Arm, metric: str, versus: str, reference: str, length: int | None, **rest) -> RetentionRow:
    return RetentionRow.of(
        arm,
        metric=metric,
        versus=versus,
        reference=reference,
        length=length,
        **({"n_seeds": arm.n_seeds} | rest),
    )


def _estimate(num: np.ndarray, den: np.ndarray, strata: np.ndarray | None, key: str, seed: int, draws: int):
    """keeps (percent), its interval, p, units, seeds of sum(num) / sum(den) per seed."""
    r = paired_ratio(num, den, strata=strata, key=key, seed=seed, draws=draws)
    if r is None:
        return dict(note="no units")
    pct = [100.0 * v if not math.isnan(v) else None for v in (r.ratio, r.low, r.high)]
    return dict(
        keeps_pct=pct[0],
        low_pct=pct[1],
        high_pct=pct[2],
        p_value=r.p_value,
        n_units=r.n_units,
        n_seeds=r.n_seeds,
    )


def _side(data: Measured, arm: Arm, ref_tags: list[str], metric: str, length: int | None):
    """(arm values (S, n), reference values (S_ref, n), strata) on the units both scored, or a note."""
    k = len(arm.tags)
    if metric == "bpb":
        assert length is not None
        got = _bpb_docs(data, arm.tags + ref_tags, length)
        if got is None:
            return f"no BPB units at L0 = {length} for both sides"
        return got[0][:k], got[0][k:], None
    got_core = _core_units(data, arm.tags + ref_tags)
    if got_core is None:
        return "no CORE examples both sides scored"
    values, strata = got_core
    return values[:k], values[k:], strata


def _one(
    data: Measured,
    arm: Arm,
    metric: str,
    versus: str,
    ref: Arm | None,
    ref_tags: list[str] | None,
    L0,
    seed,
    draws,
) -> RetentionRow:
    reference = ref.key if ref is not None else "base"
    length = L0 if metric == "bpb" else None
    if not ref_tags:
        return _row(arm, metric, versus, reference, length, note="no base model evaluated")
    side = _side(data, arm, ref_tags, metric, length)
    if isinstance(side, str):
        return _row(arm, metric, versus, reference, length, note=side)
    mine, theirs, strata = side
    if theirs.shape[0] != mine.shape[0]:
        theirs = theirs.mean(axis=0, keepdims=True)
    key = f"{NAME}:{arm.key}/{metric}/{versus}"
    if metric == "bpb":  # lower is better: the reference's BPB over the arm's
        return _row(arm, metric, versus, reference, length, **_estimate(theirs, mine, None, key, seed, draws))
    ref_level = inf.level(theirs, strata=strata)
    if ref_level is None or not ref_level.low > 0:
        return _row(
            arm,
            metric,
            versus,
            reference,
            length,
            n_units=mine.shape[1],
            note=f"{reference} CORE not above chance (95% lower bound <= 0): no ratio",
        )
    return _row(arm, metric, versus, reference, length, **_estimate(mine, theirs, strata, key, seed, draws))


def analyse(data: Measured, seed: int = 0, draws: int = inf.SIGN_FLIP_DRAWS) -> list[RetentionRow]:
    """Every continued and zero-shot arm's retention at L0: BPB (and CORE where evaluated), vs its base and vs
    the control arm (the baseline variant continued)."""
    L0 = short_length(data)
    control = next((a for a in data.arms if a.key == data.baseline_arm and a.kind == "continued"), None)
    has_core = not data.core_tasks.empty
    rows = []
    for arm in data.arms:
        if arm.kind == "base":
            continue
        for metric in ("bpb", "core") if has_core else ("bpb",):
            if metric == "bpb" and L0 is None:
                continue
            rows.append(_one(data, arm, metric, "base", None, _bases(data, arm), L0, seed, draws))
            if control is not None and arm.key != control.key and arm.group == control.group:
                rows.append(_one(data, arm, metric, "control", control, control.tags, L0, seed, draws))
    return rows


def wide_columns(rows: list[RetentionRow], baseline: str) -> dict[str, dict[str, object]]:
    """results.csv cells per arm: ``<column>``, ``_ci_low``, ``_ci_high``, ``_n_units``."""
    out: dict[str, dict[str, object]] = {}
    for r in rows:
        name = r.column(baseline)
        cells = out.setdefault(r.arm, {})
        cells[name] = r.keeps_pct
        cells[f"{name}_ci_low"], cells[f"{name}_ci_high"] = r.low_pct, r.high_pct
        cells[f"{name}_n_units"] = r.n_units if r.keeps_pct is not None else None
    return out
