"""What `rlab ls` and `rlab status` show about each tag: its state, lengths, RoPE config and headline metrics.

A tag's state comes from what is on disk, never from guessing:
  training   its lock is held (a `rlab continue` job is running it now; rlab.orchestrate.lock)
  failed     its metrics.jsonl ends with a `failed` record
  stopped    a run started but neither finished nor holds the lock (interrupted; `--resume` finishes it)
  done       its metrics.jsonl says `done`
  evaluated  done, and an eval.json exists for it
  base       a checkpoint no rlab run wrote (a nanochat base, or a clone not yet trained)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlab.paths import BaseLayout, ExperimentLayout, meta_file

LIVE_STATES = ("training", "stopped", "failed")


def tag_records(base: BaseLayout, results_root: Path) -> list[dict[str, Any]]:
    """One JSON-able record per tag under the base dir, in tag order."""
    from rlab.orchestrate.clone import checkpoint_steps, list_tags

    experiments = _experiments(results_root)
    records = []
    for tag in list_tags(base):
        steps = checkpoint_steps(base.checkpoint_dir(tag))
        meta = _read_json(meta_file(base.checkpoint_dir(tag), steps[-1])) if steps else {}
        records.append(_record(base, tag, steps, meta or {}, experiments))
    return records


def _record(
    base: BaseLayout, tag: str, steps: list[int], meta: dict, experiments: list[ExperimentLayout]
) -> dict:
    from rlab.orchestrate.watch import MetricsTail

    lineage = meta.get("lineage") or {}
    run_config = meta.get("run_config") or {}
    model = meta.get("model_config") or {}
    run = next((exp for exp in experiments if exp.metrics_file(tag).exists()), None)
    progress = MetricsTail(run.metrics_file(tag)).poll() if run else None
    evals = {exp.experiment: exp.eval_json(tag) for exp in experiments if exp.eval_json(tag).exists()}
    holder = _lock_holder(base, tag)
    if holder:
        state = "training"
    elif progress is not None and progress.finished == "failed":
        state = "failed"
    elif progress is not None and progress.finished != "done":
        state = "stopped"
    elif evals:
        state = "evaluated"
    elif progress is not None:
        state = "done"
    else:
        state = "base"
    metrics = _headline(next(iter(evals.values()))) if evals else {}
    if "val_bpb" not in metrics and progress is not None and progress.val_bpb is not None:
        metrics["val_bpb"] = progress.val_bpb
    return {
        "tag": tag,
        "variant": meta.get("variant") or run_config.get("variant"),
        "state": state,
        "steps": steps,
        "step": progress.step
        if progress is not None and progress.step is not None
        else (steps[-1] if steps else None),
        "end_step": progress.end_step if progress is not None else None,
        "seq_len": (run_config.get("train") or {}).get("seq_len") or model.get("sequence_len"),
        "from": f"{lineage['parent_tag']}@{lineage['parent_step']}" if lineage.get("parent_tag") else None,
        "rope": _rope_text(meta),
        "architecture": _architecture(base, tag, steps),
        "experiment": run.experiment if run else (next(iter(evals), None)),
        "metrics": metrics,
        "evals": {name: str(path) for name, path in evals.items()},
        "log": str(run.train_log(tag)) if run else None,
        "holder": holder,
        "error": progress.error if progress is not None else None,
    }


def eval_records(results_root: Path) -> list[dict[str, Any]]:
    """Evals that were started (eval_run.json written) but have no eval.json newer than it."""
    records = []
    for exp in _experiments(results_root):
        evals_dir = exp.root / "evals"
        for folder in sorted(evals_dir.iterdir()) if evals_dir.is_dir() else []:
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
    return [ExperimentLayout(results_root, p.name) for p in sorted(results_root.iterdir()) if p.is_dir()]


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


def _rope_text(meta: dict) -> str:
    from rlab.spec.rope import RopeSpec

    rope = meta.get("rope")
    if rope:
        try:
            return RopeSpec.model_validate(rope).describe()
        except ValueError:
            return str(rope.get("variant", "?"))
    seq = (meta.get("model_config") or {}).get("sequence_len")
    return f"rope (L0={seq})" if seq else "-"


def _headline(path: Path) -> dict[str, float | None]:
    """val BPB, CORE and passkey accuracy from an eval.json, whichever it has (CORE on a subset of the bundle's
    tasks: with core_tasks and core_bundle_tasks, the k and N of "k of N tasks")."""
    metrics = (_read_json(path) or {}).get("metrics") or {}
    found: dict[str, float | None] = {}
    for key, chain in (
        ("val_bpb", ("bpb", "val", "bpb")),
        ("core", ("core", "core")),
        ("passkey", ("passkey", "overall")),
    ):
        value: Any = metrics
        for part in chain:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, (int, float)):
            found[key] = float(value)
    core = metrics.get("core")
    if "core" in found and isinstance(core, dict) and isinstance(core.get("selection"), list):
        found["core_tasks"] = len(
            core["selection"]
        )  # a subset (rlab eval --tasks): never shown as the full CORE
        found["core_bundle_tasks"] = core.get("bundle_tasks")
    return found


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
