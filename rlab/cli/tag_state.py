"""What `rlab ls` and `rlab status` show about each tag: its state, lengths, RoPE config and headline metrics.

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
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps, name_problem

if TYPE_CHECKING:
    from rlab.core.checkpoint_meta import CheckpointMeta
    from rlab.spec.run import RunConfig

LIVE_STATES = ("training", "stalled", "stopped", "failed", "diverged")


def tag_records(base: BaseLayout, results_root: Path) -> list[dict[str, Any]]:
    """One JSON-able record per tag under the base dir, in tag order."""
    from rlab.core.checkpoint_meta import newest_meta
    from rlab.orchestrate.clone import list_tags

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
) -> dict:
    from rlab.orchestrate.watch import MetricsTail

    lineage = meta.lineage if meta is not None else None
    run = next((exp for exp in experiments if exp.metrics_file(tag).exists()), None)
    progress = MetricsTail(run.metrics_file(tag)).poll() if run else None
    launched = None if run else next((exp for exp in experiments if _launched(exp, tag)), None)
    run = run or launched
    evals, unreadable = _evals(tag, experiments)
    holder = _lock_holder(base, tag)
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
    metrics = _headline(next(iter(evals.values()))) if evals else {}
    if "val_bpb" not in metrics and progress is not None and progress.val_bpb is not None:
        metrics["val_bpb"] = progress.val_bpb
    return {
        "tag": tag,
        "variant": meta.variant_name if meta is not None else None,
        "state": state,
        "steps": steps,
        "step": progress.step
        if progress is not None and progress.step is not None
        else (steps[-1] if steps else None),
        "end_step": progress.end_step if progress is not None else None,
        "seq_len": _seq_len(tag, meta, experiments),
        "from": f"{lineage.parent_tag}@{lineage.parent_step}" if lineage is not None else None,
        "rope": _rope_text(meta),
        "architecture": _architecture(base, tag, steps),
        "experiment": run.experiment if run else (next(iter(evals), None)),
        "metrics": metrics,
        "evals": {name: str(path) for name, path in evals.items()},
        "log": str(run.train_log(tag)) if run else None,
        "holder": holder,
        "error": error,
    }


def _evals(tag: str, experiments: list[ExperimentLayout]) -> tuple[dict[str, Path], list[str]]:
    """The tag's eval.json per experiment that reads, and why each other one does not (never a silent drop)."""
    from rlab.records.base import ContractError
    from rlab.records.eval_doc import read_eval_doc

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
    import time

    from rlab.records.heartbeat import find_stall, read_heartbeats

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
    from rlab.errors import RlabError
    from rlab.spec.run import RunConfig, read_config

    path = exp.run_config(tag)
    if not path.exists():
        return None
    try:
        return read_config(path, RunConfig)
    except RlabError:
        return None


def eval_records(results_root: Path) -> list[dict[str, Any]]:
    """Evals that were started (eval_run.json written) but have no eval.json newer than it."""
    records = []
    for exp in _experiments(results_root):
        evals_dir = exp.root / "evals"
        for folder in sorted(evals_dir.iterdir()) if evals_dir.is_dir() else []:
            if name_problem("tag", folder.name) is not None:
                continue
            config, result = exp.eval_run_config(folder.name), exp.eval_json(folder.name)
            if config.exists() and (not result.exists() or result.stat().st_mtime < config.stat().st_mtime):
                records.append(
                    {
                        "experiment": exp.experiment,
                        "tag": folder.name,
                        "state": "eval unfinished",
                        "log": str(exp.eval_log(folder.name)),
                    }
                )
    return records


def _experiments(results_root: Path) -> list[ExperimentLayout]:
    if not results_root.is_dir():
        return []
    return [
        ExperimentLayout(results_root, p.name)
        for p in sorted(results_root.iterdir())
        if p.is_dir() and name_problem("experiment", p.name) is None  # not `_compare/`
    ]


def _architecture(base: BaseLayout, tag: str, steps: list[int]) -> dict[str, Any] | None:
    """nanochat-2025/2026 with windows and rotary base, from the newest checkpoint's meta and keys (torch mmap)."""
    if not steps:
        return None
    from rlab.core.checkpoint import inspect_checkpoint
    from rlab.errors import RlabError

    try:
        info = inspect_checkpoint(base.checkpoint_dir(tag), steps[-1])
    except RlabError as exc:
        return {"name": "unreadable", "describe": f"unreadable: {exc.message}"}
    return {
        "name": info.architecture,
        "describe": info.describe(),
        "window_pattern": info.window_pattern,
        "rotary_base": info.rotary_base,
    }


def _lock_holder(base: BaseLayout, tag: str) -> str | None:
    try:
        from rlab.orchestrate.lock import lock_holder
    except ImportError:  # pragma: no cover - an older checkout without tag locks
        return None
    return lock_holder(base, tag)


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


def _headline(path: Path) -> dict[str, float | None]:
    """val BPB, CORE and passkey accuracy from an eval.json, whichever it has (CORE on a subset of the bundle's
    tasks: with core_tasks and core_bundle_tasks, the k and N of "k of N tasks"); nothing from an eval.json
    this rlab cannot read."""
    from rlab.evals.bpb.records import BpbMetric
    from rlab.evals.core.records import CoreMetric
    from rlab.evals.passkey.records import PasskeyMetric
    from rlab.records.base import ContractError
    from rlab.records.eval_doc import read_eval_doc

    try:
        metrics = read_eval_doc(path).metrics
    except ContractError:
        return {}
    bpb, core, passkey = metrics.of(BpbMetric), metrics.of(CoreMetric), metrics.of(PasskeyMetric)
    val = bpb.val if bpb is not None else None
    found: dict[str, float | None] = {}
    for key, value in (
        ("val_bpb", val.bpb if val is not None else None),
        ("core", core.core if core is not None else None),
        ("passkey", passkey.overall if passkey is not None else None),
    ):
        if value is not None:
            found[key] = float(value)
    if "core" in found and core is not None and core.selection is not None:
        found["core_tasks"] = len(
            core.selection
        )  # a subset (rlab eval --tasks): never shown as the full CORE
        found["core_bundle_tasks"] = core.bundle_tasks
    return found
