"""One tag's outputs as tidy frames: run facts, BPB by length, passkey cells, CORE per task, training curves.

Everything comes from eval.json (`rlab.records.eval_doc.EvalDoc`) and metrics.jsonl; a missing piece is an empty
frame, never a guess from another file. `collect` stacks them over tags.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rlab.evals.bpb_length.records import BpbLengthMetric
from rlab.evals.core.records import CoreMetric
from rlab.evals.passkey.records import PasskeyMetric
from rlab.records.base import Record
from rlab.records.results_row import PROVENANCE_COLUMNS, provenance
from rlab.report.sources.tag_files import TagSources
from rlab.spec.experiment import ExperimentSpec

ROPE_FIELDS = (
    "base",
    "factor",
    "original_len",
    "beta_fast",
    "beta_slow",
    "attention_factor",
    "low_freq_factor",
    "high_freq_factor",
    "new_base",
    "layers",
    "windows",
)
"""RopeSpec's parameters, in results.csv's column order (as `rope_<field>`)."""
TEXT_ROPE_FIELDS = ("layers", "windows")
"""Of those, the ones whose value is a word (layers: all | global, windows: scale | fixed, for sliding-window
models), not a number. longrope's per-frequency factors are no column (d/2 numbers): eval.json's rope has them."""
PROVENANCE = PROVENANCE_COLUMNS
"""results.csv's provenance columns (`rlab.records.results_row.ResultsRow`), from each tag's eval.json."""


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
    """The RoPE a tag was evaluated with (eval.json), else the one it was trained with (run.json)."""
    if src.eval is not None:
        return src.eval.rope
    return src.run_config.rope.model_dump(mode="json") if src.run_config is not None else {}


def _train_seq_len(src: TagSources, spec: ExperimentSpec | None) -> int | None:
    """The sequence length a tag was trained at: eval.json's, else run.json's, else the spec's."""
    if src.eval is not None:
        return src.eval.train_seq_len
    train = src.run_config.train if src.run_config is not None else spec.train if spec is not None else None
    return train.seq_len if train is not None else None


def meta_row(exp: str, src: TagSources, spec: ExperimentSpec | None) -> dict[str, Any]:
    rope = _rope_of(src)
    row: dict[str, Any] = {"experiment": exp, "tag": src.tag, "variant": src.variant}
    for name in ROPE_FIELDS:
        value = rope.get(name)
        row[f"rope_{name}"] = (
            (value if isinstance(value, str) else None) if name in TEXT_ROPE_FIELDS else num(value)
        )
    ev = src.eval
    step = ev.step if ev is not None else None
    last_loss = float("nan")
    if src.metrics is not None:
        train = src.metrics[src.metrics["type"] == "train"]
        if len(train) and "loss" in train:
            last_loss = num(train["loss"].iloc[-1])
            if step is None:
                step = int_or_none(train["step"].iloc[-1])
    row["step"] = step
    row["train_seq_len"] = _train_seq_len(src, spec)
    row["tokens_trained"] = ev.checkpoint.tokens_trained if ev is not None else None
    row["last_train_loss"] = last_loss
    row["evaluated"] = src.evaluated
    facts = provenance(ev) if ev is not None else dict.fromkeys(PROVENANCE)
    row.update({c: facts[c] for c in PROVENANCE if c not in row})
    return row


def _records_frame(records: Sequence[Record], cols: list[str], sort: list[str]) -> pd.DataFrame:
    """`cols` of one eval.json section's records (empty when that eval did not run)."""
    if not records:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame.from_records([r.model_dump() for r in records])
    for c in cols:
        if c not in frame:
            frame[c] = np.nan
    frame = frame[cols].astype(float)
    frame["length"] = frame["length"].astype(int)
    return frame.sort_values(sort).reset_index(drop=True)


def bpb_length_frame(src: TagSources) -> pd.DataFrame:
    """length, bpb, ci_low, ci_high, tokens, docs — points from eval.json; intervals are the report's, added later."""
    section = src.section(BpbLengthMetric)
    rows = section.lengths if section is not None else []
    return _records_frame(rows, ["length", "bpb", "ci_low", "ci_high", "tokens", "docs"], ["length"])


def passkey_frame(src: TagSources) -> pd.DataFrame:
    """length, depth, accuracy, n — from eval.json."""
    section = src.section(PasskeyMetric)
    cells = section.cells if section is not None else []
    return _records_frame(cells, ["length", "depth", "accuracy", "n"], ["length", "depth"])


def core_task_frame(src: TagSources) -> pd.DataFrame:
    """task, type, accuracy, centered, baseline, n — from eval.json's core section."""
    cols = ["task", "type", "accuracy", "centered", "baseline", "n"]
    core = src.section(CoreMetric)
    if core is None or not core.tasks:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame.from_records([{"task": k, **v.model_dump()} for k, v in core.tasks.items()])
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
    """Random-guess accuracy per task, a fraction (`rlab.evals.core.records.CoreTask.baseline`)."""
    return dict(zip(core_tasks["task"].astype(str), core_tasks["baseline"].astype(float).tolist()))


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
