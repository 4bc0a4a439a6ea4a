"""Read one experiment's files (eval outputs, per-variant CORE CSVs, training metrics) tolerantly.

The report reads files only, never models. Producers may still be running, so every piece is
optional: a missing or unreadable file becomes `None` plus a footnote on the tag, never a crash.
Formats are the ones fixed in docs/architecture.md (eval.json schema ``rlab.eval/1``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rlab.paths import ExperimentLayout

log = logging.getLogger(__name__)

EVAL_SCHEMA = "rlab.eval/1"
_ARM_SUFFIX = re.compile(r"(-seed[1-9][0-9]*|-zeroshot)$")
# Side files of an eval, by name, with the columns each must have.
EVAL_CSVS: dict[str, tuple[str, ...]] = {
    "bpb_by_length": ("length", "bpb"),
    "passkey": ("length", "depth", "accuracy"),
    "core_examples": ("task", "index", "correct"),
    "bpb_units": ("metric", "unit", "nats", "bytes"),
    "copy_distance": ("window", "distance", "record", "first_nats", "copy_nats", "copy_acc"),
}
CORE_TASK_COLUMNS = ("task", "type", "accuracy", "centered", "baseline", "n")


@dataclass
class TagSources:
    """Everything on disk about one tag. Any piece may be None (not there yet)."""

    tag: str
    variant: str
    eval: dict[str, Any] | None = None
    run_config: dict[str, Any] | None = None
    metrics: pd.DataFrame | None = None
    csvs: dict[str, pd.DataFrame] = field(default_factory=dict)
    core_tasks: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    """Footnotes about this tag (what is missing or odd)."""

    @property
    def evaluated(self) -> bool:
        return self.eval is not None

    def metric(self, name: str) -> dict[str, Any] | None:
        """One entry of eval.json's "metrics" (absent when that eval did not run)."""
        if self.eval is None:
            return None
        value = (self.eval.get("metrics") or {}).get(name)
        return value if isinstance(value, dict) else None


@dataclass
class ExperimentSources:
    experiment: str
    layout: ExperimentLayout
    tags: list[TagSources]
    spec: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    """Experiment-level footnotes."""


def read_json(path: Path, notes: list[str], what: str) -> dict[str, Any] | None:
    """A JSON object, or None (with a footnote) when missing or unreadable."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        notes.append(f"{what} is unreadable ({type(exc).__name__}); ignored")
        log.warning("cannot read %s: %s", path, exc)
        return None
    if not isinstance(value, dict):
        notes.append(f"{what} is not a JSON object; ignored")
        return None
    return value


def read_csv(path: Path, required: tuple[str, ...], notes: list[str], what: str) -> pd.DataFrame | None:
    """A CSV with at least `required` columns, or None (with a footnote when it exists but is bad)."""
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:  # pandas' parser errors are ValueErrors
        notes.append(f"{what} is unreadable ({type(exc).__name__}); ignored")
        log.warning("cannot read %s: %s", path, exc)
        return None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        notes.append(f"{what} lacks column(s) {', '.join(missing)}; ignored")
        return None
    return frame


def read_metrics(path: Path, notes: list[str]) -> pd.DataFrame | None:
    """metrics.jsonl as a frame (one row per record). A torn last line (job still writing) is skipped.

    A resumed run repeats steps; the last record of each (type, step) wins.
    """
    if not path.is_file():
        return None
    records, bad = [], 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(rec, dict) and "type" in rec and "step" in rec:
                records.append(rec)
    if bad:
        log.info("%s: skipped %d unreadable line(s) (a job still writing leaves a torn last line)", path, bad)
    if not records:
        notes.append("metrics.jsonl has no records")
        return None
    frame = pd.DataFrame.from_records(records)
    frame = frame.drop_duplicates(subset=["type", "step"], keep="last")
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
            tags.update(p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))
    return sorted(tags)


def read_spec(layout: ExperimentLayout, notes: list[str]) -> dict[str, Any] | None:
    """The resolved spec as plain data (used only for the baseline name and lengths); optional."""
    path = layout.resolved_spec
    if not path.is_file():
        return None
    import yaml

    try:
        value = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        notes.append(f"spec.resolved.yaml is unreadable ({type(exc).__name__}); ignored")
        return None
    return value if isinstance(value, dict) else None


def read_tag(layout: ExperimentLayout, tag: str, known_variants: list[str]) -> TagSources:
    """Every file about one tag."""
    notes: list[str] = []
    ev = read_json(layout.eval_json(tag), notes, "eval.json")
    if ev is not None and ev.get("schema") != EVAL_SCHEMA:
        notes.append(f"eval.json has schema {ev.get('schema')!r}, expected {EVAL_SCHEMA!r}; read anyway")
    run = read_json(layout.run_config(tag), notes, "run.json")
    variant = str((ev or {}).get("variant") or (run or {}).get("variant") or _variant_from_tag(tag, known_variants))
    src = TagSources(tag=tag, variant=variant, eval=ev, run_config=run, notes=notes)
    if ev is None and not any(n.startswith("eval.json") for n in notes):
        notes.append("not evaluated yet (no eval.json)")
    src.metrics = read_metrics(layout.metrics_file(tag), notes)
    trains = variant != "base" and ((run or {}).get("train") or {}).get("steps") != 0  # not a training-free arm
    if src.metrics is None and not layout.metrics_file(tag).is_file() and trains:
        notes.append("no training metrics (metrics.jsonl)")
    if ev is not None:  # eval.json is written last: without it the side files may be from a run in progress
        for name, required in EVAL_CSVS.items():
            frame = read_csv(layout.eval_dir(tag) / f"{name}.csv", required, notes, f"{name}.csv")
            if frame is not None:
                src.csvs[name] = frame
        suffix = _ARM_SUFFIX.search(tag)  # seed replicates and zero-shot arms have their own per-task file
        core_csv = layout.core_task_csv(variant + (suffix.group(0) if suffix else ""))
        src.core_tasks = read_csv(core_csv, ("task", "accuracy", "centered"), notes, core_csv.name)
        if src.core_tasks is None and not core_csv.is_file():
            notes.append(f"{core_csv.name} (per-task CORE) is missing")
    return src


def spec_variant_names(spec: dict[str, Any] | None) -> list[str]:
    """Variant names of a resolved spec (a name -> config mapping, or a list of names/objects)."""
    variants = (spec or {}).get("variants")
    if isinstance(variants, dict):
        return [str(v) for v in variants]
    if isinstance(variants, list):
        return [str(v.get("name", "")) if isinstance(v, dict) else str(v) for v in variants]
    return []


def read_experiment(layout: ExperimentLayout) -> ExperimentSources:
    """All tags of an experiment, read tolerantly."""
    from rlab.spec.rope import VARIANT_NAMES

    notes: list[str] = []
    spec = read_spec(layout, notes)
    known = sorted(set(VARIANT_NAMES) | set(spec_variant_names(spec)))
    base = (spec or {}).get("base")
    base_tag = base.get("tag") if isinstance(base, dict) else None
    tags = []
    for tag in discover_tags(layout):
        src = read_tag(layout, tag, known)
        init = (src.run_config or {}).get("init")
        if (tag == base_tag or (isinstance(init, dict) and init.get("kind") == "scratch")) and src.eval is None:
            # The from-scratch base run (`rlab pretrain`) is where variants start, not one of them; once
            # evaluated (`rlab eval --tag <base>`, variant "base") it is the report's reference arm.
            notes.append(f"{tag}: the base model's own run, not a variant; left out of the comparison")
            continue
        tags.append(src)
    return ExperimentSources(experiment=layout.experiment, layout=layout, tags=tags, spec=spec, notes=notes)
