"""The retrieval table: passkey and RULER-style items scored by generation and by likelihood, side by side.

Generation is the published protocol (passkey: the first generated number is the key; RULER-style: the
fraction of the references in the greedy output); likelihood scores the same items by the right value's mean
log-probability against distractors of the same form (`rlab.evals.retrieval.likelihood`), a graded signal a
small model gives long before it writes the key. Per arm, eval and length: likelihood accuracy with its 95%
Wilson interval over items, the mean margin (nats/token) with its studentized interval over items (the seed
term included when an arm has several seeds), and the generation score. Levels, not tests: no verdict.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rlab.evals.passkey.records import PasskeyLength, PasskeyMetric
from rlab.evals.ruler.records import RulerMetric
from rlab.report.render import methods as mth
from rlab.report.render.table_model import BLANK, Table, arm_order
from rlab.report.stats import inference as inf
from rlab.report.stats.uncertainty import wilson

if TYPE_CHECKING:
    from rlab.report.assemble.report_data import ReportData

Retrieval = PasskeyMetric | RulerMetric
EVALS: dict[type[Retrieval], tuple[str, str]] = {
    PasskeyMetric: ("passkey_choices", "passkey"),
    RulerMetric: ("ruler_choices", "RULER-style"),
}
"""eval.json section -> (its choices CSV in TagSources.csvs, row label)."""
_KEYS = ["task", "length", "depth", "trial"]


def _margins(frames: list[pd.DataFrame]) -> np.ndarray:
    """Margins per item, one row per seed when every seed scored the same items (else pooled in one row)."""
    ordered = [f.sort_values(_KEYS, na_position="first")["margin"].to_numpy(dtype=np.float64) for f in frames]
    keys = [f.sort_values(_KEYS, na_position="first")[_KEYS].astype(str).to_numpy().tolist() for f in frames]
    if len(frames) > 1 and all(k == keys[0] for k in keys):
        return np.vstack(ordered)
    return np.concatenate(ordered)[None]


def _generation(data: ReportData, tags: list[str], model: type[Retrieval], length: int) -> float | None:
    """The generation score of the same length: passkey accuracy, RULER-style mean score (seed mean)."""
    values = []
    for src in data.sources.tags if data.sources is not None else []:
        section = src.section(model) if src.tag in tags else None
        for row in section.by_length if section is not None else []:
            if row.length == length:
                values.append(row.accuracy if isinstance(row, PasskeyLength) else row.score)
    return sum(values) / len(values) if values else None


def _cell(frames: list[pd.DataFrame], generation: float | None) -> str:
    n = sum(len(f) for f in frames)
    if n == 0:
        return BLANK
    acc = wilson(float(sum(int(f["correct"].sum()) for f in frames)), n)
    margin = inf.level(_margins(frames))
    assert acc is not None and margin is not None
    interval = "" if math.isnan(margin.low) else f" [{margin.low:+.2f}, {margin.high:+.2f}]"
    gen = BLANK if generation is None else f"; generation {generation:.2f}"
    return (
        f"{acc.estimate:.2f} [{acc.low:.2f}, {acc.high:.2f}], margin {margin.estimate:+.2f}{interval}{gen} "
        f"(n={len(frames[0])})"
    )


def retrieval_table(data: ReportData) -> Table | None:
    """The table, or None when no tag has likelihood-scored items (an older eval, or eval.retrieval_choices: 0)."""
    if data.sources is None:
        return None
    by_tag = {src.tag: src for src in data.sources.tags}
    found = [(s, n) for s in by_tag.values() for n, _ in EVALS.values() if n in s.csvs]
    if not found:
        return None
    lengths = sorted({int(L) for s, n in found for L in s.csvs[n]["length"]})
    chance = {
        1.0 / float(section.likelihood.choices)
        for s in by_tag.values()
        for model in EVALS
        if (section := s.section(model)) is not None and section.likelihood is not None
    }
    rows = []
    for arm in arm_order(data):
        tags = [t for t in data.arm(arm).tags if t in by_tag]
        for model, (csv, label) in EVALS.items():
            frames_of = [by_tag[t].csvs[csv] for t in tags if csv in by_tag[t].csvs]
            if not frames_of:
                continue
            row = {"arm": data.label(arm), "eval": label}
            for L in lengths:
                frames = [f[f["length"] == L] for f in frames_of]
                row[f"L={L}"] = _cell(frames, _generation(data, tags, model, L))
            rows.append(row)
    chance_text = ", ".join(f"{c:.2f}" for c in sorted(chance)) or "1/choices"
    return Table(
        "Retrieval: likelihood beside generation",
        pd.DataFrame(rows, columns=["arm", "eval", *(f"L={L}" for L in lengths)]),
        set(),
        f"likelihood accuracy [{mth.WILSON} over items] (chance {chance_text}), mean margin of the right "
        f"value over the best distractor in nats/token [{mth.INTERVAL} over items], the generation "
        "score of the same items, n = items per seed.",
        about="Each passkey and RULER-style item scored twice: by generation (the published protocols) and by "
        "likelihood, the right value against distractors of the same form after the same prompt (CORE's "
        "multiple-choice rule; rlab.evals.retrieval.likelihood). Levels per arm, no verdicts.",
    )
