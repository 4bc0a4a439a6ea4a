"""Read one experiment's files (eval outputs, training metrics) through their contracts (`rlab.records`, each
eval's `records.py`; which side CSVs: each eval's definition, `eval_csvs`).

The report reads files only, never models. Producers may still be running, so every piece is
optional: a missing file, or one that does not match its contract, becomes `None` plus a footnote
on the tag, never a crash and never a guess at what an off-contract file meant.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pandas as pd

from rlab.errors import SpecError
from rlab.evals import catalog, outputs
from rlab.evals.definition import resolve
from rlab.paths import ExperimentLayout, name_problem
from rlab.records.base import ContractError, Record
from rlab.records.eval_doc import EvalDoc, read_eval_doc
from rlab.records.metrics_log import read_metrics_records
from rlab.records.rows import read_rows
from rlab.records.sections import Section
from rlab.records.units import BpbUnit
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.loading import load_spec
from rlab.spec.rope import VARIANT_NAMES
from rlab.spec.run import RunConfig, ScratchInit, read_config

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Section)


def eval_csvs() -> dict[str, tuple[str, type[Record]]]:
    """The side files the statistics need, by key (the file's name without .csv) -> (file, row model):
    bpb_units.csv and every file an eval's definition marks `report` (`rlab.evals.definition.OutputFile`).
    Everything else is in eval.json."""
    files: dict[str, tuple[str, type[Record]]] = {"bpb_units": (outputs.BPB_UNITS_CSV, BpbUnit)}
    for definition in catalog.definitions():
        files.update({f.key: (f.name, resolve(f.row)) for f in definition.files if f.report})
    return files


@dataclass
class TagSources:
    """Everything on disk about one tag. Any piece may be None (not there yet)."""

    tag: str
    variant: str
    eval: EvalDoc | None = None
    run_config: RunConfig | None = None
    """run.json, the config the tag was trained with; None for an evaluated-only tag (or an off-contract file)."""
    metrics: pd.DataFrame | None = None
    csvs: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Footnotes about this tag (what is missing or odd)."""
    group: str = ""
    """The experiment it comes from when several are compared (its arm is `<group>/<variant>`); '' otherwise."""

    @property
    def evaluated(self) -> bool:
        return self.eval is not None

    def section(self, model: type[S]) -> S | None:
        """eval.json's section of type `model` (e.g. `rlab.evals.core.records.CoreMetric`), typed; None when that
        eval did not run."""
        return self.eval.metrics.of(model) if self.eval is not None else None


@dataclass
class ExperimentSources:
    experiment: str
    layout: ExperimentLayout
    tags: list[TagSources]
    spec: ExperimentSpec | None
    """spec.resolved.yaml; None when missing or off-contract, and for several experiments compared at once."""
    notes: list[str] = field(default_factory=list)
    """Experiment-level footnotes."""
    variants: list[str] = field(default_factory=list)
    """The spec's variant names in its order (`<experiment>/<name>` when several experiments are compared)."""


def read_run(path: Path, notes: list[str]) -> RunConfig | None:
    """run.json through its model (`rlab.spec.run.RunConfig`), or None (with a footnote when it breaks it)."""
    if not path.is_file():
        return None
    try:
        return read_config(path, RunConfig)
    except (OSError, UnicodeDecodeError) as exc:
        notes.append(f"run.json is unreadable ({type(exc).__name__})")
        log.warning("cannot read %s: %s", path, exc)
    except SpecError as exc:
        notes.append("run.json ignored: it does not match its contract (RunConfig)")
        log.warning("cannot read %s: %s", path, exc)
    return None


def read_table(path: Path, model: type[Record], notes: list[str]) -> pd.DataFrame | None:
    """A side CSV through its row model, or None (with a footnote when it exists but breaks its contract)."""
    if not path.is_file():
        return None
    try:
        rows = read_rows(path, model)
    except ContractError as exc:
        notes.append(f"{path.name} ignored: {exc.message}")
        return None
    return pd.DataFrame([r.model_dump() for r in rows], columns=list(model.columns))


def read_metrics(path: Path, notes: list[str]) -> pd.DataFrame | None:
    """metrics.jsonl (one record stream per tag, `rlab.records.metrics_log.MetricsRecord`) as a frame, one row per
    record."""
    if not path.is_file():
        return None
    try:
        records = read_metrics_records(path)
    except (OSError, UnicodeDecodeError, ContractError) as exc:
        notes.append(f"metrics.jsonl ignored: {getattr(exc, 'message', exc)}")
        return None
    if not records:
        notes.append("metrics.jsonl has no records")
        return None
    frame = pd.DataFrame.from_records([r.model_dump() for r in records])
    return frame.sort_values(["type", "step"], kind="stable").reset_index(drop=True)


def _variant_from_tag(tag: str, known: list[str]) -> str:
    """Best-effort variant for a tag with no eval.json / run.json: the longest known suffix."""
    for name in sorted(known, key=len, reverse=True):
        if tag == name or tag.endswith("-" + name):
            return name
    return tag


def discover_tags(layout: ExperimentLayout) -> list[str]:
    """Tags with a run folder or an eval folder, sorted."""
    tags: set[str] = set()
    for parent in (layout.root / "runs", layout.root / "evals"):
        if parent.is_dir():
            tags.update(
                p.name for p in parent.iterdir() if p.is_dir() and name_problem("tag", p.name) is None
            )
    return sorted(tags)


def read_spec(layout: ExperimentLayout, notes: list[str]) -> ExperimentSpec | None:
    """The resolved spec through its model (`rlab.spec.loading.load_spec`); optional: None (with a footnote when it
    does not load) leaves the report to what the tags' own files say."""
    path = layout.resolved_spec
    if not path.is_file():
        return None
    try:
        return load_spec(path, resolve=False)
    except SpecError as exc:
        notes.append("spec.resolved.yaml ignored: it does not match its contract (ExperimentSpec)")
        log.warning("cannot read %s: %s", path, exc)
        return None


def read_tag(layout: ExperimentLayout, tag: str, known_variants: list[str]) -> TagSources:
    """Every file about one tag."""
    notes: list[str] = []
    ev = None
    if layout.eval_json(tag).is_file():
        try:
            ev = read_eval_doc(layout.eval_json(tag))
        except ContractError as exc:
            notes.append(f"eval.json ignored: {exc.message} {exc.hint or ''}".strip())
    run = read_run(layout.run_config(tag), notes)
    variant = (
        ev.variant
        if ev is not None
        else run.variant
        if run is not None
        else _variant_from_tag(tag, known_variants)
    )
    src = TagSources(tag=tag, variant=variant, eval=ev, run_config=run, notes=notes)
    if ev is None and not any(n.startswith("eval.json") for n in notes):
        notes.append("not evaluated yet (no eval.json)")
    src.metrics = read_metrics(layout.metrics_file(tag), notes)
    trains = variant != "base" and (run is None or run.train.steps != 0)  # not a training-free arm
    if src.metrics is None and not layout.metrics_file(tag).is_file() and trains:
        notes.append("no training metrics (metrics.jsonl)")
    if ev is not None:  # eval.json is written last: without it the side files may be from a run in progress
        for name, (file, model) in eval_csvs().items():
            frame = read_table(layout.eval_dir(tag) / file, model, notes)
            if frame is not None:
                src.csvs[name] = frame
    return src


def left_out(src: TagSources) -> str | None:
    """Why a tag stays out of the comparison and its verdicts: its run diverged (a dead arm, `rlab.core.divergence`),
    or its eval.json cannot be read; None for a tag that takes part."""
    frame = src.metrics
    if frame is not None and "kind" in frame.columns and not (frame["type"] == "done").any():
        dead = frame[frame["kind"] == "diverged"]
        if not dead.empty:
            return f"its run diverged at step {dead['step'].iloc[-1]} ({dead['error'].iloc[-1]})"
    unreadable = next((n for n in src.notes if n.startswith("eval.json ignored")), None)
    if src.eval is None and unreadable is not None:
        return unreadable.replace("eval.json ignored", "eval.json unreadable", 1)
    return None


def read_experiment(layout: ExperimentLayout) -> ExperimentSources:
    """All tags of an experiment, read tolerantly."""

    notes: list[str] = []
    spec = read_spec(layout, notes)
    variants = list(spec.variants) if spec is not None else []
    known = sorted(set(VARIANT_NAMES) | set(variants))
    base_tag = spec.base.tag if spec is not None else None
    tags = []
    for tag in discover_tags(layout):
        src = read_tag(layout, tag, known)
        why = left_out(src)
        if why is not None:  # never a silent drop: the note says which tag and why
            notes.append(f"left out: {tag}, {why}")
            continue
        scratch = src.run_config is not None and isinstance(src.run_config.init, ScratchInit)
        if (tag == base_tag or scratch) and src.eval is None:
            # The from-scratch base run (`rlab pretrain`) is where variants start, not one of them; once
            # evaluated (`rlab eval --tag <base>`, variant "base") it is the report's reference arm.
            notes.append(f"{tag}: the base model's own run, not a variant; left out of the comparison")
            continue
        tags.append(src)
    return ExperimentSources(layout.experiment, layout, tags, spec, notes, variants)
