"""What an experiment recorded about one exported arm: its run config, eval.json and results.csv verdicts.

Every piece is optional (a nanochat base has no experiment; an arm may be unevaluated or unreported): the card
says what is missing rather than guessing. Paths shown to readers are relative to the results root.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlab.errors import RlabError
from rlab.paths import ExperimentLayout, default_results_root
from rlab.records.eval_doc import read_eval_doc
from rlab.spec.run import RunConfig, read_config


@dataclass(frozen=True)
class Verdict:
    """One results.csv comparison of the arm with its reference arm."""

    metric: str
    control: str
    diff: str
    ci_low: str
    ci_high: str
    direction: str  # "neg=better" / "pos=better" / ""
    n_units: str
    verdict: str
    family: str


@dataclass
class ArmFacts:
    experiment: str | None = None
    run: Any = None  # rlab.spec.run.RunConfig
    eval_doc: Any = None  # rlab.records.eval_doc.EvalDoc
    eval_where: str | None = None  # relative to the results root
    row: dict[str, str] = field(default_factory=dict)  # the arm's results.csv row
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def target_len(self) -> int | None:
        return int(self.run.train.seq_len) if self.run is not None else None


def arm_facts(experiment: str | None, tag: str, results_root: Path | None) -> ArmFacts:
    """The experiment's records of `tag` under `results_root` (the default results root when None)."""

    facts = ArmFacts(experiment=experiment)
    if not experiment:
        return facts
    root = Path(results_root or default_results_root())
    layout = ExperimentLayout(root, experiment)
    try:
        if layout.run_config(tag).is_file():
            facts.run = read_config(layout.run_config(tag), RunConfig)
    except RlabError:
        pass
    eval_json = layout.eval_json(tag)
    facts.eval_where = _relative(eval_json, root)
    try:
        facts.eval_doc = read_eval_doc(eval_json) if eval_json.is_file() else None
    except RlabError:
        facts.eval_doc = None
    facts.row = _results_row(layout.results_csv, experiment, tag)
    facts.verdicts = list(verdicts(facts.row))
    return facts


def _relative(path: Path, root: Path) -> str:
    return f"{root.name}/{path.relative_to(root).as_posix()}"


def _results_row(path: Path, experiment: str, tag: str) -> dict[str, str]:

    if not path.is_file():
        return {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row.get("experiment") == experiment and row.get("tag") == tag:
                return row
    return {}


def verdicts(row: dict[str, str]):
    """Each `<metric>_verdict_vs_<control>` cell of the row with its difference, interval, units and family."""
    for column, verdict in row.items():
        if "_verdict_vs_" not in column or not verdict:
            continue
        metric, control = column.split("_verdict_vs_", 1)
        diff_column = next((c for c in row if c.startswith(f"{metric}_diff_vs_{control}")), "")
        direction = diff_column.partition("(")[2].rstrip(")")
        yield Verdict(
            metric=metric,
            control=control,
            diff=row.get(diff_column, ""),
            ci_low=row.get(f"{metric}_diff_vs_{control}_ci_low", ""),
            ci_high=row.get(f"{metric}_diff_vs_{control}_ci_high", ""),
            direction=direction,
            n_units=row.get(f"{metric}_n_units_vs_{control}", ""),
            verdict=verdict,
            family=row.get(f"{metric}_family_vs_{control}", ""),
        )


UNITS = (
    ("extension_bpb", "bits per byte (BPB at the longest length minus at the training length)"),
    ("bpb", "bits per byte"),
    ("core", "CORE score (centered accuracy)"),
    ("passkey", "accuracy (fraction of trials)"),
    ("copy_gain", "nats per token"),
    ("copy_retention", "fraction of the near-copy gain"),
)


def unit_of(metric: str) -> str:
    """The unit a results.csv metric is measured in (by its name: `bpb_len_1024` is bits per byte)."""
    return next((unit for prefix, unit in UNITS if prefix in metric), "")
