"""One tag's outputs as tidy frames: run facts, BPB by length, passkey cells, CORE per task, training curves.

Readers are tolerant (a missing piece is an empty frame); `collect` stacks them over tags.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rlab.report.sources import TagSources

ROPE_FIELDS = ("base", "factor", "original_len", "beta_fast", "beta_slow", "attention_factor",
               "low_freq_factor", "high_freq_factor")
"""RopeSpec's parameters, in results.csv's column order (as `rope_<field>`)."""
BPB_METRICS = ("train", "val")


# ---------------------------------------------------------------- per-tag frames


def num(value: Any) -> float:
    """A float, NaN for None / non-numbers."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def int_or_none(value: Any) -> int | None:
    f = num(value)
    return None if math.isnan(f) else int(f)


def _rope_of(src: TagSources) -> dict[str, Any]:
    rope = (src.eval or {}).get("rope") or (src.run_config or {}).get("rope") or {}
    return rope if isinstance(rope, dict) else {}


def _train_seq_len(src: TagSources, spec: dict[str, Any] | None) -> int | None:
    for candidate in ((src.eval or {}).get("train_seq_len"),
                      ((src.run_config or {}).get("train") or {}).get("seq_len"),
                      ((spec or {}).get("train") or {}).get("seq_len")):
        if int_or_none(candidate) is not None:
            return int_or_none(candidate)
    return None


def meta_row(exp: str, src: TagSources, spec: dict[str, Any] | None) -> dict[str, Any]:
    rope = _rope_of(src)
    row: dict[str, Any] = {"experiment": exp, "tag": src.tag, "variant": src.variant}
    for name in ROPE_FIELDS:
        row[f"rope_{name}"] = num(rope.get(name))
    ev = src.eval or {}
    step = int_or_none(ev.get("step"))
    last_loss = float("nan")
    if src.metrics is not None:
        train = src.metrics[src.metrics["type"] == "train"]
        if len(train) and "loss" in train:
            last_loss = num(train["loss"].iloc[-1])
            if step is None:
                step = int_or_none(train["step"].iloc[-1])
    row["step"] = step
    row["train_seq_len"] = _train_seq_len(src, spec)
    row["tokens_trained"] = int_or_none(ev.get("tokens_trained"))
    row["last_train_loss"] = last_loss
    row["evaluated"] = src.evaluated
    return row


def _records_frame(src: TagSources, metric: str, key: str, csv: str, cols: list[str], sort: list[str]) -> pd.DataFrame:
    """`cols` of the records under eval.json's metrics[metric][key], else of the tag's `csv` side file."""
    entry = src.metric(metric)
    rows = entry.get(key) if entry else None
    if isinstance(rows, list) and rows:
        frame = pd.DataFrame.from_records([r for r in rows if isinstance(r, dict)])
    elif csv in src.csvs:
        frame = src.csvs[csv].copy()
    else:
        return pd.DataFrame(columns=cols)
    for c in cols:
        if c not in frame:
            frame[c] = np.nan
    frame = frame[cols].astype(float)
    frame["length"] = frame["length"].astype(int)
    return frame.sort_values(sort).reset_index(drop=True)


def bpb_length_frame(src: TagSources) -> pd.DataFrame:
    """length, bpb, ci_low, ci_high, tokens, docs — from eval.json, else bpb_by_length.csv."""
    return _records_frame(src, "bpb_length", "lengths", "bpb_by_length",
                          ["length", "bpb", "ci_low", "ci_high", "tokens", "docs"], ["length"])


def passkey_frame(src: TagSources) -> pd.DataFrame:
    """length, depth, accuracy, n — from eval.json, else passkey.csv."""
    return _records_frame(src, "passkey", "cells", "passkey", ["length", "depth", "accuracy", "n"], ["length", "depth"])


def core_task_frame(src: TagSources) -> pd.DataFrame:
    """task, type, accuracy, centered, baseline, n — from results_<variant>.csv, else eval.json."""
    cols = ["task", "type", "accuracy", "centered", "baseline", "n"]
    if src.core_tasks is not None:
        frame = src.core_tasks.copy()
    else:
        entry = src.metric("core")
        tasks = entry.get("tasks") if entry else None
        if not isinstance(tasks, dict) or not tasks:
            return pd.DataFrame(columns=cols)
        frame = pd.DataFrame.from_records([{"task": k, **v} for k, v in tasks.items() if isinstance(v, dict)])
    for c in cols:
        if c not in frame:
            frame[c] = np.nan if c != "type" else ""
    frame = frame[cols].copy()
    frame["task"] = frame["task"].astype(str)
    frame["type"] = frame["type"].fillna("").astype(str)
    for c in ("accuracy", "centered", "baseline", "n"):
        frame[c] = pd.to_numeric(frame[c], errors="coerce").astype(float)
    return frame.sort_values("task").reset_index(drop=True)


def task_baselines(core_tasks: pd.DataFrame) -> dict[str, float]:
    """Random-guess accuracy per task as a fraction.

    Derived from accuracy and centered when both are there (b = (a - c) / (1 - c)), which is exact
    whatever scale the producer wrote `baseline` in; else `baseline`, read as percent when > 1.
    """
    out: dict[str, float] = {}
    for row in core_tasks.itertuples(index=False):
        a, c, b = float(row.accuracy), float(row.centered), float(row.baseline)
        if not (math.isnan(a) or math.isnan(c)) and c != 1.0:
            out[row.task] = (a - c) / (1.0 - c)
        elif not math.isnan(b):
            out[row.task] = b / 100.0 if b > 1.0 else b
    return out


def curves_frame(src: TagSources) -> pd.DataFrame:
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


def stack(parts: list[pd.DataFrame], keys: list[tuple[str, str]], cols: list[str]) -> pd.DataFrame:
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


