"""Eval outputs + training metrics -> tidy frames, comparisons vs the baseline, and the wide results table.

`collect(layout, baseline=...)` returns a `ReportData`: long frames (BPB by length, passkey cells,
per-task CORE, training curves), per-tag scalar metrics with their intervals, paired comparisons
against the baseline variant, and `results` — the wide one-row-per-tag frame written to
``results.csv``. Nothing here renders or writes; see `tables`, `plots`, `results_csv`, `build`.

Missing pieces are blanks (NaN / "") plus a numbered footnote, never an exception.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlab import records as rec
from rlab.paths import ExperimentLayout
from rlab.report import comparability as cmp
from rlab.report import uncertainty as unc
from rlab.report.sources import ExperimentSources, TagSources, read_experiment

log = logging.getLogger(__name__)

ROPE_FIELDS = ("base", "factor", "original_len", "beta_fast", "beta_slow", "attention_factor",
               "low_freq_factor", "high_freq_factor")
"""RopeSpec's parameters, in results.csv's column order (as `rope_<field>`)."""
BPB_METRICS = ("train", "val")
PROVENANCE = rec.PROVENANCE_COLUMNS
"""results.csv's provenance columns (`rlab.records.ResultsRow`), taken from each tag's eval.json."""
NOT_COMPARABLE = "not comparable"
"""The verdict where the two tags were not measured or trained alike (see `rlab.report.comparability`)."""
LOWER_IS_BETTER = {"train_bpb": True, "val_bpb": True, "core": False, "passkey_overall": False}


def lower_is_better(metric: str) -> bool:
    return LOWER_IS_BETTER.get(metric, metric.startswith("bpb_len_"))


def better_word(metric: str) -> str:
    """The sign convention written into a comparison column's name."""
    return "neg=better" if lower_is_better(metric) else "pos=better"


class Footnotes:
    """Numbered, de-duplicated footnotes shared by every table of one report."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> int:
        if text not in self.items:
            self.items.append(text)
        return self.items.index(text) + 1


@dataclass
class ReportData:
    experiment: str
    baseline: str
    baseline_tag: str | None
    meta: pd.DataFrame
    """One row per tag: experiment, tag, variant, label, rope_*, step, train_seq_len, tokens_trained, ..."""
    scalars: pd.DataFrame
    """tag, variant, metric (train_bpb, val_bpb, bpb_len_<L>, core, passkey_overall), value, ci_low, ci_high."""
    comparisons: pd.DataFrame
    """tag, variant, metric, diff, diff_low, diff_high, rel_pct, rel_low, rel_high, paired, verdict."""
    bpb_length: pd.DataFrame
    passkey: pd.DataFrame
    core_tasks: pd.DataFrame
    curves: pd.DataFrame
    """tag, variant, type (train/eval), step, loss, val_bpb."""
    results: pd.DataFrame
    """The wide frame behind results.csv."""
    footnotes: Footnotes
    tag_notes: dict[str, list[int]] = field(default_factory=dict)
    """Footnote numbers per tag (shown next to its label)."""
    sources: ExperimentSources | None = None
    mismatches: list[cmp.Mismatch] = field(default_factory=list)
    """How compared tags differ in their evals or training (shown first; they block verdicts)."""
    allow_mismatch: bool = False
    """Verdicts were given across mismatches anyway (`--allow-mismatch`)."""

    def label(self, tag: str) -> str:
        """The row label of a tag in tables: its variant (or tag) plus footnote marks."""
        row = self.meta.loc[self.meta["tag"] == tag].iloc[0]
        marks = self.tag_notes.get(tag, [])
        return f"{row['label']} [{','.join(map(str, marks))}]" if marks else str(row["label"])


# ---------------------------------------------------------------- per-tag frames


def _num(value: Any) -> float:
    """A float, NaN for None / non-numbers."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _int_or_none(value: Any) -> int | None:
    f = _num(value)
    return None if math.isnan(f) else int(f)


def _rope_of(src: TagSources) -> dict[str, Any]:
    rope = src.eval.rope if src.eval is not None else (src.run_config or {}).get("rope") or {}
    return rope if isinstance(rope, dict) else {}


def _train_seq_len(src: TagSources, spec: dict[str, Any] | None) -> int | None:
    if src.eval is not None:
        return src.eval.train_seq_len
    for candidate in (((src.run_config or {}).get("train") or {}).get("seq_len"),
                      ((spec or {}).get("train") or {}).get("seq_len")):
        if _int_or_none(candidate) is not None:
            return _int_or_none(candidate)
    return None


def _meta_row(exp: str, src: TagSources, spec: dict[str, Any] | None) -> dict[str, Any]:
    rope = _rope_of(src)
    row: dict[str, Any] = {"experiment": exp, "tag": src.tag, "variant": src.variant}
    for name in ROPE_FIELDS:
        row[f"rope_{name}"] = _num(rope.get(name))
    ev = src.eval
    step = ev.step if ev is not None else None
    last_loss = float("nan")
    if src.metrics is not None:
        train = src.metrics[src.metrics["type"] == "train"]
        if len(train) and "loss" in train:
            last_loss = _num(train["loss"].iloc[-1])
            if step is None:
                step = _int_or_none(train["step"].iloc[-1])
    row["step"] = step
    row["train_seq_len"] = _train_seq_len(src, spec)
    row["tokens_trained"] = ev.checkpoint.tokens_trained if ev is not None else None
    row["last_train_loss"] = last_loss
    row["evaluated"] = src.evaluated
    row.update({k: v for k, v in rec.provenance(ev).items() if k in PROVENANCE} if ev is not None else {})
    return row


def _records_frame(src: TagSources, metric: str, key: str, cols: list[str], sort: list[str]) -> pd.DataFrame:
    """`cols` of the records under eval.json's metrics[metric][key] (empty when that eval did not run)."""
    entry = src.metric(metric)
    rows = entry.get(key) if entry else None
    if not rows:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame.from_records(rows)
    for c in cols:
        if c not in frame:
            frame[c] = np.nan
    frame = frame[cols].astype(float)
    frame["length"] = frame["length"].astype(int)
    return frame.sort_values(sort).reset_index(drop=True)


def _bpb_length_frame(src: TagSources) -> pd.DataFrame:
    """length, bpb, ci_low, ci_high, tokens, docs — points from eval.json; intervals filled in from units later."""
    return _records_frame(src, "bpb_length", "lengths", ["length", "bpb", "ci_low", "ci_high", "tokens", "docs"],
                          ["length"])


def _passkey_frame(src: TagSources) -> pd.DataFrame:
    """length, depth, accuracy, n — from eval.json."""
    return _records_frame(src, "passkey", "cells", ["length", "depth", "accuracy", "n"], ["length", "depth"])


def _core_task_frame(src: TagSources) -> pd.DataFrame:
    """task, type, accuracy, centered, baseline, n — from eval.json's core section."""
    cols = ["task", "type", "accuracy", "centered", "baseline", "n"]
    entry = src.metric("core")
    if not entry or not entry["tasks"]:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame.from_records([{"task": k, **v} for k, v in entry["tasks"].items()])
    for c in cols:
        if c not in frame:
            frame[c] = np.nan if c != "type" else ""
    frame = frame[cols].copy()
    frame["task"] = frame["task"].astype(str)
    frame["type"] = frame["type"].fillna("").astype(str)
    for c in ("accuracy", "centered", "baseline", "n"):
        frame[c] = pd.to_numeric(frame[c], errors="coerce").astype(float)
    return frame.sort_values("task").reset_index(drop=True)


def _task_baselines(core_tasks: pd.DataFrame) -> dict[str, float]:
    """Random-guess accuracy per task, a fraction (`rlab.records.CoreTask.baseline`)."""
    return {str(r.task): float(r.baseline) for r in core_tasks.itertuples(index=False)}


def _curves_frame(src: TagSources) -> pd.DataFrame:
    cols = ["type", "step", "loss", "val_bpb"]
    if src.metrics is None:
        return pd.DataFrame(columns=cols)
    frame = src.metrics[src.metrics["type"].isin(["train", "eval"])].copy()
    for c in cols:
        if c not in frame:
            frame[c] = np.nan
    frame = frame[cols]
    frame["step"] = frame["step"].astype(int)
    frame["loss"] = pd.to_numeric(frame["loss"], errors="coerce").astype(float)
    frame["val_bpb"] = pd.to_numeric(frame["val_bpb"], errors="coerce").astype(float)
    return frame.reset_index(drop=True)


def _stack(parts: list[pd.DataFrame], keys: list[tuple[str, str]], cols: list[str]) -> pd.DataFrame:
    """Concatenate per-tag frames with leading tag/variant columns (empty-safe, stable dtypes)."""
    frames = []
    for (tag, variant), part in zip(keys, parts, strict=True):
        if len(part):
            part = part.copy()
            part.insert(0, "variant", variant)
            part.insert(0, "tag", tag)
            frames.append(part)
    if not frames:
        return pd.DataFrame(columns=["tag", "variant", *cols])
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------- intervals


@dataclass
class _Units:
    """BPB units of one tag, by metric name (train, val, len_<L>) -> frame(unit, nats, bytes)."""

    by_metric: dict[str, pd.DataFrame]

    @classmethod
    def of(cls, src: TagSources) -> _Units:
        frame = src.csvs.get("bpb_units")
        if frame is None:
            return cls({})
        frame = frame.copy()
        frame["metric"] = frame["metric"].astype(str)
        frame["unit"] = frame["unit"].astype(str)
        return cls({m: g[["unit", "nats", "bytes"]].reset_index(drop=True) for m, g in frame.groupby("metric")})


def _scalar_name(units_metric: str) -> str:
    """bpb_units.csv's metric name -> the report's (train -> train_bpb, len_512 -> bpb_len_512)."""
    if units_metric.startswith("len_"):
        return f"bpb_len_{units_metric[4:]}"
    return f"{units_metric}_bpb"


def _units_metric(scalar: str) -> str:
    if scalar.startswith("bpb_len_"):
        return f"len_{scalar[8:]}"
    return scalar[: -len("_bpb")]


def _scalars_of(src: TagSources, bpb_len: pd.DataFrame, core_tasks: pd.DataFrame, units: _Units,
                seed: int, n_boot: int) -> list[dict[str, Any]]:
    """Every scalar metric of one tag: the point from eval.json, the interval bootstrapped from its units
    (none without units: the report's bootstrap is the only interval method)."""
    rows: list[dict[str, Any]] = []

    def add(metric: str, value: float, low: float, high: float, interval: str) -> None:
        rows.append({"metric": metric, "value": value, "ci_low": low, "ci_high": high, "interval": interval})

    def bpb_point(metric: str, value: float) -> None:
        u = units.by_metric.get(_units_metric(metric))
        iv = (unc.bpb_interval(u["nats"].to_numpy(), u["bytes"].to_numpy(), key=f"{src.tag}/{metric}",
                               seed=seed, n_boot=n_boot) if u is not None else None)
        if iv is not None:
            add(metric, value, iv.low, iv.high, "bootstrap")
        elif not math.isnan(value):
            add(metric, value, float("nan"), float("nan"), "")

    bpb = src.metric("bpb") or {}
    for split in BPB_METRICS:
        if bpb.get(split):
            bpb_point(f"{split}_bpb", _num(bpb[split]["bpb"]))
    for r in bpb_len.itertuples(index=False):
        bpb_point(f"bpb_len_{r.length}", float(r.bpb))

    core = src.metric("core")
    if core is not None:
        value = _num(core.get("core"))
        examples = src.csvs.get("core_examples")
        iv = None
        if examples is not None:
            tasks = {str(t): g["correct"].to_numpy(dtype=float) for t, g in examples.groupby("task")}
            iv = unc.core_interval(tasks, _task_baselines(core_tasks), key=f"{src.tag}/core", seed=seed,
                                   n_boot=n_boot)
        if iv is not None:
            add("core", value, iv.low, iv.high, "bootstrap")
        elif not math.isnan(value):
            add("core", value, float("nan"), float("nan"), "")
    passkey = src.metric("passkey")
    if passkey is not None and not math.isnan(_num(passkey.get("overall"))):
        add("passkey_overall", _num(passkey.get("overall")), float("nan"), float("nan"), "")
    return rows


def _paired_bpb(a: _Units, b: _Units, metric: str, key: str, seed: int, n_boot: int) -> unc.PairedDiff | None:
    ua, ub = a.by_metric.get(_units_metric(metric)), b.by_metric.get(_units_metric(metric))
    if ua is None or ub is None:
        return None
    joined = ua.merge(ub, on="unit", suffixes=("_a", "_b"))
    return unc.bpb_paired_diff(joined["nats_a"].to_numpy(), joined["bytes_a"].to_numpy(),
                               joined["nats_b"].to_numpy(), joined["bytes_b"].to_numpy(),
                               key=key, seed=seed, n_boot=n_boot)


def _paired_core(a: TagSources, b: TagSources, baselines: dict[str, float], key: str, seed: int,
                 n_boot: int) -> unc.PairedDiff | None:
    ea, eb = a.csvs.get("core_examples"), b.csvs.get("core_examples")
    if ea is None or eb is None:
        return None
    joined = ea[["task", "index", "correct"]].merge(eb[["task", "index", "correct"]], on=["task", "index"],
                                                    suffixes=("_a", "_b"))
    pairs = {str(t): (g["correct_a"].to_numpy(dtype=float), g["correct_b"].to_numpy(dtype=float))
             for t, g in joined.sort_values(["task", "index"]).groupby("task")}
    return unc.core_paired_diff(pairs, baselines, key=key, seed=seed, n_boot=n_boot)


def _compare(tag_src: TagSources, base_src: TagSources, scal: pd.DataFrame, units: dict[str, _Units],
             baselines: dict[str, float], seed: int, n_boot: int,
             mismatched: list[cmp.Mismatch] | None = None) -> list[dict[str, Any]]:
    """Comparison rows (tag vs baseline tag) for every metric both have; no better/worse verdict for a
    metric that `mismatched` concerns, and none without paired units (no shared units, no claim)."""
    mine = scal[scal["tag"] == tag_src.tag].set_index("metric")
    theirs = scal[scal["tag"] == base_src.tag].set_index("metric")
    rows = []
    for metric in mine.index:
        if metric not in theirs.index:
            continue
        a, b = mine.loc[metric], theirs.loc[metric]
        key = f"{tag_src.tag}-vs-{base_src.tag}/{metric}"
        paired: unc.PairedDiff | None = None
        if tag_src.tag != base_src.tag:
            if metric.endswith("_bpb") or metric.startswith("bpb_len_"):
                paired = _paired_bpb(units[tag_src.tag], units[base_src.tag], metric, key, seed, n_boot)
            elif metric == "core":
                paired = _paired_core(tag_src, base_src, baselines, key, seed, n_boot)
        diff = float(a["value"] - b["value"])
        scale = abs(float(b["value"]))
        rel = diff / scale * 100.0 if scale > 0 else float("nan")
        if paired is not None:
            d_lo, d_hi = paired.diff.low, paired.diff.high
            r_lo, r_hi = paired.rel_pct.low, paired.rel_pct.high
            how = "paired"
        elif tag_src.tag == base_src.tag:
            d_lo = d_hi = r_lo = r_hi = 0.0
            how = "self"
        else:
            d_lo = d_hi = r_lo = r_hi = float("nan")
            how = ""
        diff_iv = unc.Interval(diff, d_lo, d_hi)
        word = "" if tag_src.tag == base_src.tag else unc.verdict(diff_iv, lower_is_better(metric))
        if word and mismatched and cmp.blocks(mismatched, metric):
            word = NOT_COMPARABLE
        rows.append({"tag": tag_src.tag, "variant": tag_src.variant, "metric": metric, "diff": diff,
                     "diff_low": d_lo, "diff_high": d_hi, "rel_pct": rel, "rel_low": r_lo, "rel_high": r_hi,
                     "interval": how, "verdict": word})
    return rows


def _with_scalar_intervals(bpb_length: pd.DataFrame, scalars: pd.DataFrame) -> pd.DataFrame:
    """bpb_length with each row's interval replaced by the report's own (bootstrap) one when it has one."""
    if bpb_length.empty:
        return bpb_length
    boot = scalars[(scalars["interval"] == "bootstrap") & scalars["metric"].str.startswith("bpb_len_")]
    lookup = {(r.tag, int(r.metric[8:])): (r.ci_low, r.ci_high) for r in boot.itertuples(index=False)}
    out = bpb_length.copy()
    for i, r in enumerate(out.itertuples(index=False)):
        if (r.tag, int(r.length)) in lookup:
            out.iloc[i, out.columns.get_loc("ci_low")], out.iloc[i, out.columns.get_loc("ci_high")] = \
                lookup[(r.tag, int(r.length))]
    return out


# ---------------------------------------------------------------- the wide frame

_ID = ("experiment", "tag", "variant")
_RUN = ("step", "train_seq_len", "tokens_trained", "last_train_loss",
        *(c for c in PROVENANCE if c not in ("step", "train_seq_len", "tokens_trained")))
_INT_COLUMNS = ("step", "train_seq_len", "tokens_trained", "skipped_steps", "seed")
_METRIC_RE = re.compile(r"^(train_bpb|val_bpb|core|passkey_overall|bpb_len_(\d+)|passkey_len_(\d+))(.*)$")
_DETAIL_ORDER = ("", "_ci_low", "_ci_high", "_partial", "_missing_tasks")


def _metric_rank(col: str) -> tuple[int, int, str] | None:
    m = _METRIC_RE.match(col)
    if not m:
        return None
    name, len_bpb, len_pk, rest = m.groups()
    rank = {"train_bpb": (0, 0), "val_bpb": (1, 0), "core": (3, 0), "passkey_overall": (4, 0)}.get(name)
    if rank is None:
        rank = (2, int(len_bpb)) if len_bpb else (5, int(len_pk))
    return rank[0], rank[1], rest


def column_key(col: str) -> tuple:
    """Sort key giving results.csv its stable column order (whatever subset of columns exists)."""
    if col in _ID:
        return (0, _ID.index(col))
    if col.startswith("rope_") and col[5:] in ROPE_FIELDS:
        return (1, ROPE_FIELDS.index(col[5:]))
    if col in _RUN:
        return (2, _RUN.index(col))
    ranked = _metric_rank(col)
    if ranked is not None:
        group, sub, rest = ranked
        if "_vs_" in rest:  # comparison columns come after every value column
            kinds = ("_diff_vs_", "_rel_vs_", "_verdict_vs_")
            kind = next((i for i, k in enumerate(kinds) if rest.startswith(k)), len(kinds))
            tail = 2 if rest.endswith("_ci_high") else 1 if rest.endswith("_ci_low") else 0
            return (4, group, sub, kind, tail, col)
        detail = _DETAIL_ORDER.index(rest) if rest in _DETAIL_ORDER else len(_DETAIL_ORDER)
        return (3, group, sub, detail, col)
    if col == "notes":
        return (6,)
    return (5, col)


def order_columns(columns: list[str]) -> list[str]:
    return sorted(columns, key=column_key)


def comparison_columns(metric: str, baseline: str) -> dict[str, str]:
    """Names of the comparison columns of one metric vs `baseline` (sign convention in the name)."""
    sign = better_word(metric)
    rel = f"{metric}_rel_vs_{baseline}_pct"
    cols = {"rel": f"{rel} ({sign})", "rel_low": f"{rel}_ci_low", "rel_high": f"{rel}_ci_high",
            "verdict": f"{metric}_verdict_vs_{baseline}"}
    if metric in ("core", "passkey_overall"):  # near-zero baselines make a relative change meaningless
        diff = f"{metric}_diff_vs_{baseline}"
        cols.update({"diff": f"{diff} ({sign})", "diff_low": f"{diff}_ci_low", "diff_high": f"{diff}_ci_high"})
    return cols


def _wide(data: ReportData) -> pd.DataFrame:
    meta = data.meta.drop(columns=["label", "evaluated"])
    rows = {r["tag"]: dict(r) for r in meta.to_dict("records")}
    for r in data.scalars.itertuples(index=False):
        row = rows[r.tag]
        row[r.metric] = r.value
        if r.metric != "passkey_overall":
            row[f"{r.metric}_ci_low"], row[f"{r.metric}_ci_high"] = r.ci_low, r.ci_high
    for src in (data.sources.tags if data.sources else []):
        core = src.metric("core")
        if core is not None:
            rows[src.tag]["core_partial"] = bool(core.get("partial", False))
            missing = core.get("missing_tasks") or []
            rows[src.tag]["core_missing_tasks"] = ";".join(map(str, missing)) if isinstance(missing, list) else ""
    if len(data.passkey):
        by_len = data.passkey.groupby(["tag", "length"])["accuracy"].mean()
        for (tag, length), acc in by_len.items():
            rows[tag][f"passkey_len_{length}"] = float(acc)
    for r in data.comparisons.itertuples(index=False):
        names = comparison_columns(r.metric, data.baseline)
        row = rows[r.tag]
        row[names["rel"]], row[names["rel_low"]], row[names["rel_high"]] = r.rel_pct, r.rel_low, r.rel_high
        row[names["verdict"]] = r.verdict
        if "diff" in names:
            row[names["diff"]], row[names["diff_low"]], row[names["diff_high"]] = r.diff, r.diff_low, r.diff_high
    for tag, marks in data.tag_notes.items():
        rows[tag]["notes"] = "; ".join(data.footnotes.items[i - 1] for i in marks)
    frame = pd.DataFrame.from_records(list(rows.values()))
    frame = frame[order_columns(list(frame.columns))]
    for col in _INT_COLUMNS:
        if col in frame:
            frame[col] = frame[col].astype("Int64")
    for col in frame.columns:
        if col.endswith("_verdict_vs_" + data.baseline) or col in ("notes", "core_missing_tasks"):
            frame[col] = frame[col].fillna("").astype(str)
        if col == "core_partial":
            frame[col] = frame[col].astype("boolean")
    return frame.reset_index(drop=True)


# ---------------------------------------------------------------- entry point


def resolve_baseline(requested: str | None, spec: dict[str, Any] | None, variants: list[str]) -> str:
    """The baseline variant: the flag, else the spec's (report.baseline / baseline), else `rope`."""
    if requested:
        return requested
    spec = spec or {}
    for candidate in ((spec.get("report") or {}).get("baseline") if isinstance(spec.get("report"), dict) else None,
                      spec.get("baseline")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return "rope"


def collect(layout: ExperimentLayout, baseline: str | None = None, *, seed: int = 0,
            n_boot: int = unc.DEFAULT_BOOT, allow_mismatch: bool = False) -> ReportData:
    """Read an experiment's outputs and assemble every frame of the report."""
    sources = read_experiment(layout)
    notes = Footnotes()
    baseline = resolve_baseline(baseline, sources.spec, [t.variant for t in sources.tags])
    tags = sources.tags

    counts = pd.Series([t.variant for t in tags]).value_counts() if tags else pd.Series(dtype=int)
    meta_rows = []
    for src in tags:
        row = _meta_row(layout.experiment, src, sources.spec)
        row["label"] = src.variant if counts.get(src.variant, 0) == 1 else src.tag
        meta_rows.append(row)
    meta_cols = [*_ID, *(f"rope_{f}" for f in ROPE_FIELDS), *_RUN, "evaluated", "label"]
    meta = pd.DataFrame.from_records(meta_rows, columns=meta_cols)
    for col in _INT_COLUMNS:
        meta[col] = meta[col].astype("Int64")

    keys = [(t.tag, t.variant) for t in tags]
    bpb_parts = [_bpb_length_frame(t) for t in tags]
    core_parts = [_core_task_frame(t) for t in tags]
    bpb_length = _stack(bpb_parts, keys, ["length", "bpb", "ci_low", "ci_high", "tokens", "docs"])
    passkey = _stack([_passkey_frame(t) for t in tags], keys, ["length", "depth", "accuracy", "n"])
    core_tasks = _stack(core_parts, keys, ["task", "type", "accuracy", "centered", "baseline", "n"])
    curves = _stack([_curves_frame(t) for t in tags], keys, ["type", "step", "loss", "val_bpb"])

    units = {t.tag: _Units.of(t) for t in tags}
    scal_rows = []
    for src, bl, ct in zip(tags, bpb_parts, core_parts, strict=True):
        for r in _scalars_of(src, bl, ct, units[src.tag], seed, n_boot):
            scal_rows.append({"tag": src.tag, "variant": src.variant, **r})
    scalars = pd.DataFrame.from_records(
        scal_rows, columns=["tag", "variant", "metric", "value", "ci_low", "ci_high", "interval"])

    bpb_length = _with_scalar_intervals(bpb_length, scalars)

    base_tags = [t for t in tags if t.variant == baseline]
    base_src = next((t for t in base_tags if t.evaluated), base_tags[0] if base_tags else None)
    if len(base_tags) > 1 and base_src is not None:
        notes.add(f"several tags have the baseline variant '{baseline}'; compared against {base_src.tag}")
    comp_rows: list[dict[str, Any]] = []
    found: list[cmp.Mismatch] = []
    if base_src is None:
        notes.add(f"baseline variant '{baseline}' has no outputs: relative changes are blank")
    else:
        baselines = _task_baselines(core_parts[tags.index(base_src)])
        for src in tags:
            mism = (cmp.mismatches(src.eval, base_src.eval)
                    if src is not base_src and src.eval is not None and base_src.eval is not None else [])
            found += mism
            comp_rows.extend(_compare(src, base_src, scalars, units, baselines, seed, n_boot,
                                      None if allow_mismatch else mism))
    comparisons = pd.DataFrame.from_records(
        comp_rows, columns=["tag", "variant", "metric", "diff", "diff_low", "diff_high", "rel_pct", "rel_low",
                            "rel_high", "interval", "verdict"])

    for msg in sources.notes:
        notes.add(msg)
    tag_notes: dict[str, list[int]] = {}
    for src in tags:
        core = src.metric("core")
        extra = []
        if core is not None and core.get("partial"):
            missing = core.get("missing_tasks") or []
            extra.append("partial CORE" + (f" (missing: {', '.join(map(str, missing))})" if missing else ""))
        for name, what in (("bpb_length", "BPB"), ("passkey", "passkey")):
            skipped = (src.metric(name) or {}).get("skipped") or []
            lengths = [str(s.get("length")) for s in skipped if isinstance(s, dict)]
            if lengths:
                extra.append(f"{what} not measured at length(s) {', '.join(lengths)} (skipped by the eval: "
                             f"{skipped[0].get('reason', 'no reason given')})")
        marks = [notes.add(f"{src.tag}: {msg}") for msg in [*src.notes, *extra]]
        if marks:
            tag_notes[src.tag] = marks

    data = ReportData(experiment=layout.experiment, baseline=baseline,
                      baseline_tag=base_src.tag if base_src else None, meta=meta, scalars=scalars,
                      comparisons=comparisons, bpb_length=bpb_length, passkey=passkey, core_tasks=core_tasks,
                      curves=curves, results=pd.DataFrame(), footnotes=notes, tag_notes=tag_notes,
                      sources=sources, mismatches=found, allow_mismatch=allow_mismatch)
    data.results = _wide(data) if tags else pd.DataFrame(columns=[*_ID])
    log.info("collected %d tag(s) of experiment %s (baseline %s)", len(tags), layout.experiment, baseline)
    return data
