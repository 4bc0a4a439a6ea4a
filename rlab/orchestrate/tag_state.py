"""Each tag's state, lengths, RoPE config and headline metrics, as `rlab ls` and `rlab status` show them.

A tag's state comes from what is on disk, never from guessing:
  training   its lock is held (a `rlab continue` job is running it now; rlab.orchestrate.lock)
  failed     its metrics.jsonl ends with a `failed` record (`diverged`: its loss stopped changing or passed its
             bound, `rlab.core.divergence`; `stalled`: rlab's watchdog stopped it, a rank silent too long)
  stalled    also while it still holds the lock, once a rank's heartbeat is past the watchdog's bound
  stopped    a run started but neither finished nor holds the lock (interrupted; `--resume` finishes it),
             also one launched (its run.json written) that was stopped before it logged a step
  done       its metrics.jsonl says `done`
  evaluated  done, and an eval.json exists for it
  eval unreadable  done, its eval.json cannot be read (reports leave it out and say so)
  base       a checkpoint no rlab run wrote (a nanochat base, or a clone not yet trained)

`tag_records` gives one `TagRecord` per tag, `eval_records` one `EvalRecord` per unfinished eval; the CLI lays
them out (`as_dict` is their --json form).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlab.core.checkpoint import inspect_checkpoint
from rlab.core.checkpoint_meta import CheckpointMeta, newest_meta
from rlab.errors import RlabError
from rlab.evals.bpb.records import BpbMetric
from rlab.evals.core.records import CoreMetric
from rlab.evals.passkey.records import PasskeyMetric
from rlab.orchestrate.clone import list_tags
from rlab.orchestrate.lock import lock_holder
from rlab.orchestrate.watch import MetricsTail
from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps, name_problem
from rlab.records.base import ContractError
from rlab.records.eval_doc import read_eval_doc
from rlab.records.heartbeat import find_stall, read_heartbeats
from rlab.spec.run import RunConfig, read_config

LIVE_STATES = ("training", "stalled", "stopped", "failed", "diverged")
"""The states `rlab status` shows: a run in progress, or one that ended without finishing."""


@dataclass(frozen=True)
class Architecture:
    """nanochat-2025/2026 with its windows and rotary base, or why the newest checkpoint cannot be read."""

    name: str
    """nanochat-2025, nanochat-2026, or ``unreadable``."""
    describe: str
    window_pattern: str | None = None
    rotary_base: float | None = None

    def as_dict(self) -> dict[str, Any]:
        facts = {"window_pattern": self.window_pattern, "rotary_base": self.rotary_base}
        return {
            "name": self.name,
            "describe": self.describe,
            **{k: v for k, v in facts.items() if v is not None},
        }


@dataclass(frozen=True)
class Headline:
    """A tag's headline metrics: val BPB (its eval.json's, else the last in-training one), CORE, passkey accuracy.
    CORE on a subset of the bundle's tasks has `core_tasks` of `core_bundle_tasks`: never shown as the full CORE."""

    val_bpb: float | None = None
    core: float | None = None
    passkey: float | None = None
    core_tasks: int | None = None
    core_bundle_tasks: int | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        """The metrics it has (--json); with `core_tasks`, `core_bundle_tasks` too (None when unknown)."""
        found: dict[str, float | int | None] = {
            k: v
            for k, v in (("val_bpb", self.val_bpb), ("core", self.core), ("passkey", self.passkey))
            if v is not None
        }
        if self.core_tasks is not None:
            found |= {"core_tasks": self.core_tasks, "core_bundle_tasks": self.core_bundle_tasks}
        return found


@dataclass(frozen=True)
class TagRecord:
    """What `rlab ls` shows about one tag under the base dir (`rlab status`: the live ones)."""

    tag: str
    variant: str | None
    state: str
    steps: list[int]
    """Its complete checkpoints."""
    step: int | None
    """The step its run reached (its metrics.jsonl), else its newest checkpoint's."""
    end_step: int | None
    seq_len: int | None
    parent: str | None
    """``<tag>@<step>`` it was cloned from."""
    rope: str
    architecture: Architecture | None
    experiment: str | None
    metrics: Headline = field(default_factory=Headline)
    evals: dict[str, Path] = field(default_factory=dict)
    """eval.json per experiment that reads."""
    log: Path | None = None
    holder: str | None = None
    """Who holds its lock (a running job)."""
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "variant": self.variant,
            "state": self.state,
            "steps": self.steps,
            "step": self.step,
            "end_step": self.end_step,
            "seq_len": self.seq_len,
            "from": self.parent,
            "rope": self.rope,
            "architecture": self.architecture.as_dict() if self.architecture is not None else None,
            "experiment": self.experiment,
            "metrics": self.metrics.as_dict(),
            "evals": {name: str(path) for name, path in self.evals.items()},
            "log": str(self.log) if self.log is not None else None,
            "holder": self.holder,
            "error": self.error,
        }


@dataclass(frozen=True)
class EvalRecord:
    """An eval that was started (eval_run.json written) but has no eval.json newer than it."""

    experiment: str
    tag: str
    log: Path
    state: str = "eval unfinished"

    def as_dict(self) -> dict[str, str]:
        return {"experiment": self.experiment, "tag": self.tag, "state": self.state, "log": str(self.log)}


def tag_records(base: BaseLayout, results_root: Path) -> list[TagRecord]:
    """One record per tag under the base dir, in tag order."""
    experiments = _experiments(results_root)
    records = []
    for tag in list_tags(base):
        steps = checkpoint_steps(base.checkpoint_dir(tag))
        meta = newest_meta(base.checkpoint_dir(tag))
        records.append(_record(base, tag, steps, meta, experiments))
    return records


def _record(
    base: BaseLayout,
    tag: str,
    steps: list[int],
    meta: CheckpointMeta | None,
    experiments: list[ExperimentLayout],
) -> TagRecord:
    lineage = meta.lineage if meta is not None else None
    run = next((exp for exp in experiments if exp.metrics_file(tag).exists()), None)
    progress = MetricsTail(run.metrics_file(tag)).poll() if run else None
    launched = None if run else next((exp for exp in experiments if _launched(exp, tag)), None)
    run = run or launched
    evals, unreadable = _evals(tag, experiments)
    holder = lock_holder(base, tag)
    error = progress.error if progress is not None else None
    stall = _stall(run, tag) if holder and run is not None else None
    if stall is not None:
        state, error = "stalled", stall
    elif holder:
        state = "training"
    elif progress is not None and progress.finished == "failed":
        state = progress.kind or "failed"
    elif progress is not None and progress.finished != "done":
        state = "stopped"
    elif launched is not None:  # its job was launched and stopped before logging anything
        state, error = "stopped", "launched, stopped before its first step"
    elif evals:
        state = "evaluated"
    elif unreadable:
        state, error = "eval unreadable", f"left out of reports: {unreadable[0]}"
    elif progress is not None:
        state = "done"
    else:
        state = "base"
    metrics = _headline(next(iter(evals.values()))) if evals else Headline()
    if metrics.val_bpb is None and progress is not None and progress.val_bpb is not None:
        metrics = Headline(**{**vars(metrics), "val_bpb": progress.val_bpb})
    return TagRecord(
        tag=tag,
        variant=meta.variant_name if meta is not None else None,
        state=state,
        steps=steps,
        step=progress.step
        if progress is not None and progress.step is not None
        else (steps[-1] if steps else None),
        end_step=progress.end_step if progress is not None else None,
        seq_len=_seq_len(tag, meta, experiments),
        parent=f"{lineage.parent_tag}@{lineage.parent_step}" if lineage is not None else None,
        rope=_rope_text(meta),
        architecture=_architecture(base, tag, steps),
        experiment=run.experiment if run else (next(iter(evals), None)),
        metrics=metrics,
        evals=evals,
        log=run.train_log(tag) if run else None,
        holder=holder,
        error=error,
    )


def _evals(tag: str, experiments: list[ExperimentLayout]) -> tuple[dict[str, Path], list[str]]:
    """The tag's eval.json per experiment that reads, and why each other one does not (never a silent drop)."""
    found, unreadable = {}, []
    for exp in experiments:
        path = exp.eval_json(tag)
        if not path.exists():
            continue
        try:
            read_eval_doc(path)
        except ContractError as exc:
            unreadable.append(f"{path}: {exc.message}")
            continue
        found[exp.experiment] = path
    return found, unreadable


def _stall(run: ExperimentLayout, tag: str) -> str | None:
    """`stalled since 09:41 (rank 1 at step 40)` while a rank of the tag's running job is past the watchdog's
    bound (`rlab.records.heartbeat.find_stall`), else None."""
    stall = find_stall(read_heartbeats(run.heartbeat_dir(tag)), time.time())
    return stall.describe() if stall is not None else None


def _launched(exp: ExperimentLayout, tag: str) -> bool:
    """Whether `rlab continue`/`pretrain` wrote a run.json for a job on `tag` in this experiment (a
    training-free arm's run.json has 0 steps: no job)."""
    planned = _planned_run(exp, tag)
    return planned is not None and planned.train.steps > 0


def _planned_run(exp: ExperimentLayout, tag: str) -> RunConfig | None:
    """The run.json `rlab continue`/`pretrain` wrote for `tag` in this experiment, if any it can read (one it
    cannot describes no run it planned)."""
    path = exp.run_config(tag)
    if not path.exists():
        return None
    try:
        return read_config(path, RunConfig)
    except RlabError:
        return None


def eval_records(results_root: Path) -> list[EvalRecord]:
    """Evals that were started (eval_run.json written) but have no eval.json newer than it."""
    records = []
    for exp in _experiments(results_root):
        evals_dir = exp.root / "evals"
        for folder in sorted(evals_dir.iterdir()) if evals_dir.is_dir() else []:
            if name_problem("tag", folder.name) is not None:
                continue
            config, result = exp.eval_run_config(folder.name), exp.eval_json(folder.name)
            if config.exists() and (not result.exists() or result.stat().st_mtime < config.stat().st_mtime):
                records.append(EvalRecord(exp.experiment, folder.name, exp.eval_log(folder.name)))
    return records


def _experiments(results_root: Path) -> list[ExperimentLayout]:
    if not results_root.is_dir():
        return []
    return [
        ExperimentLayout(results_root, p.name)
        for p in sorted(results_root.iterdir())
        if p.is_dir() and name_problem("experiment", p.name) is None  # not `_compare/`
    ]


def _architecture(base: BaseLayout, tag: str, steps: list[int]) -> Architecture | None:
    """nanochat-2025/2026 with windows and rotary base, from the newest checkpoint's meta and keys (no weights)."""
    if not steps:
        return None
    try:
        info = inspect_checkpoint(base.checkpoint_dir(tag), steps[-1])
    except RlabError as exc:
        return Architecture("unreadable", f"unreadable: {exc.message}")
    return Architecture(info.architecture, info.describe(), info.window_pattern, info.rotary_base)


def _seq_len(tag: str, meta: CheckpointMeta | None, experiments: list[ExperimentLayout]) -> int | None:
    """The length the tag trains at: the run config of its newest checkpoint when the tag's own run wrote it;
    else (a clone before its first step, whose checkpoint and run config are its source's) the run.json of a
    run planned on it; else its checkpoint's own length (a base)."""
    if meta is None:
        return None
    config = meta.run_config
    if config is not None and config.tag in (None, tag) and config.train is not None and config.train.seq_len:
        return config.train.seq_len
    planned = next((p for exp in experiments if (p := _planned_run(exp, tag)) is not None), None)
    return planned.train.seq_len if planned is not None else meta.sequence_len


def _rope_text(meta: CheckpointMeta | None) -> str:
    if meta is None:
        return "-"
    if meta.rope is not None:
        return meta.rope.describe()
    return f"rope (L0={meta.sequence_len})"


def _headline(path: Path) -> Headline:
    """val BPB, CORE and passkey accuracy from an eval.json, whichever it has; nothing from an eval.json this
    rlab cannot read."""
    try:
        metrics = read_eval_doc(path).metrics
    except ContractError:
        return Headline()
    bpb, core, passkey = metrics.of(BpbMetric), metrics.of(CoreMetric), metrics.of(PasskeyMetric)
    val = bpb.val if bpb is not None else None
    subset = core is not None and core.core is not None and core.selection is not None
    return Headline(
        val_bpb=_float(val.bpb if val is not None else None),
        core=_float(core.core if core is not None else None),
        passkey=_float(passkey.overall if passkey is not None else None),
        core_tasks=len(core.selection)
        if subset and core is not None and core.selection is not None
        else None,
        core_bundle_tasks=core.bundle_tasks if subset and core is not None else None,
    )


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)
