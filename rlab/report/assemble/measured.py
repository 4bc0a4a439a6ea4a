"""What the tags of a report measured and how its arms compare (`Measured`): what the analyses read.

Built by `rlab.report.assemble.collect.assemble`; the copy-distance and estimand analyses take it, and
`rlab.report.assemble.report_data.ReportData` is it plus their results. Nothing here computes or renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from rlab.report.assemble.endpoints import Primary
from rlab.report.sources import comparability as cmp
from rlab.report.sources.arms import Arm
from rlab.report.sources.tag_files import ExperimentSources


class Footnotes:
    """Numbered, de-duplicated footnotes shared by every table of one report."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> int:
        if text not in self.items:
            self.items.append(text)
        return self.items.index(text) + 1


@dataclass(kw_only=True)
class Measured:
    """One experiment's frames, arms, estimates and comparisons: what the analyses and renderers read."""

    experiment: str
    baseline: str
    baseline_tag: str | None
    meta: pd.DataFrame
    """One row per tag: experiment, tag, variant, arm, kind, seed, label, rope_*, step, train_seq_len, ..."""
    arms: list[Arm]
    baseline_arm: str | None
    """Key of the arm every other is compared with."""
    primary: Primary
    scalars: pd.DataFrame
    """Per arm: arm, variant, kind, metric, value, ci_low, ci_high, n_units, n_seeds, interval."""
    tag_scalars: pd.DataFrame
    """The same per tag (one seed each): tag, metric, value, ci_low, ci_high, n_units, n_seeds, interval."""
    comparisons: pd.DataFrame
    """arm, reference (the arm it is compared with), variant, kind, metric, diff(_low/_high), rel_pct(_low/_high),
    ref_value, se, df, p_value (None where untestable), method, n_units, n_seeds, interval, family (primary /
    secondary; "" for comparisons in no family), family_size, p_holm, verdict (`verdicts.Verdict`), mde (80% power
    at alpha / family size), mde_rel_pct."""
    bpb_length: pd.DataFrame
    passkey: pd.DataFrame
    core_tasks: pd.DataFrame
    curves: pd.DataFrame
    """tag, variant, type (train/eval), step, loss, val_bpb."""
    footnotes: Footnotes
    clustered: bool = False
    """True when every tag's BPB units name their documents (cluster bootstrap by document)."""
    tag_notes: dict[str, list[int]] = field(default_factory=dict)
    """Footnote numbers per tag (shown next to its arm's label)."""
    sources: ExperimentSources | None = None
    mismatches: list[cmp.Mismatch] = field(default_factory=list)
    """How compared tags differ in their evals or training (shown first; each blocks the verdicts it touches)."""
    allow_mismatch: bool = False
    """Verdicts were given across mismatches anyway (`--allow-mismatch`)."""
    best: dict[str, str] = field(default_factory=dict)
    """metric -> the arm that beats every other arm on it beyond noise (metrics without one are absent)."""
    context_caps: dict[str, dict[int, int] | None] = field(default_factory=dict)
    """Per tag: length -> the most tokens back its model attends there, where its windows cap the context
    (None: its eval.json does not record the windows)."""

    def arm_caps(self, key: str) -> dict[int, int]:
        """Lengths at which some tag of the arm cannot attend to the whole input -> the smallest reach."""
        out: dict[int, int] = {}
        for tag in self.arm(key).tags:
            for length, cap in (self.context_caps.get(tag) or {}).items():
                out[length] = min(cap, out.get(length, cap))
        return out

    def arm(self, key: str) -> Arm:
        return next(a for a in self.arms if a.key == key)

    def arm_of(self, tag: str) -> Arm:
        return next(a for a in self.arms if tag in a.tags)

    def label(self, key: str) -> str:
        """The row label of an arm in tables: its key, seeds when several, plus its tags' footnote marks."""
        arm = self.arm(key)
        marks = sorted({m for t in arm.tags for m in self.tag_notes.get(t, [])})
        text = arm.key + (f" ×{arm.n_seeds} seeds" if arm.n_seeds > 1 else "")
        return f"{text} [{','.join(map(str, marks))}]" if marks else text
