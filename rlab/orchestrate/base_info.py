"""What the plan needs to know about the base checkpoint: its context length L0 and loader position.

Read from the base step's meta JSON (nanochat's or rlab's), so the default target length
(4 x L0) and the continuation's data start come from the checkpoint itself, not a guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rlab.errors import CheckpointError
from rlab.paths import BaseLayout, meta_file
from rlab.spec.run import DataStart


@dataclass(frozen=True)
class BaseInfo:
    """The facts of one base checkpoint step that shape the plan."""

    tag: str
    step: int
    sequence_len: int
    data_start: DataStart | None
    """The recorded loader position; None when the base records none."""
    experiment: str | None = None
    """The experiment that wrote it (rlab metas of continued tags), for lineage checks."""
    model: dict[str, Any] | None = None
    """The meta's model_config and architecture (rlab writes one), for the memory plan."""


def read_base_info(base: BaseLayout, tag: str, step: int) -> BaseInfo:
    """BaseInfo of `tag`@`step`; a CheckpointError naming the file when the meta is missing or lacks L0."""
    path = meta_file(base.checkpoint_dir(tag), step)
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(
            f"No meta for {tag}@{step}: {path} does not exist.",
            "Check --base-dir, --base-tag and --from-step (`rlab ls` lists checkpoints).",
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable meta JSON ({exc}).") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: meta is not a JSON object.")
    config = meta.get("model_config") or {}
    seq_len = config.get("sequence_len") if isinstance(config, dict) else None
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
        raise CheckpointError(
            f"{path}: model_config.sequence_len is missing or invalid ({seq_len!r}).",
            "Set target_len (--target-len) and each variant's original_len explicitly.",
        )
    return BaseInfo(
        tag=tag,
        step=step,
        sequence_len=seq_len,
        data_start=loader_position(meta, tag, step),
        experiment=_experiment_of(meta),
        model={"model_config": config, "architecture": meta.get("architecture")},
    )


def loader_position(meta: dict[str, Any], tag: str, step: int) -> DataStart | None:
    """The loader position a meta records: rlab's `loader_state`, else nanochat's `dataloader_state_dict`."""
    own = meta.get("loader_state")
    if isinstance(own, dict) and own.get("ranks"):
        return DataStart(source="rlab", tag=tag, step=step, loader_state=own)
    nano = meta.get("dataloader_state_dict")
    if isinstance(nano, dict) and "pq_idx" in nano:
        return DataStart(
            source="nanochat",
            tag=tag,
            step=step,
            pq_idx=int(nano["pq_idx"]),
            rg_idx=int(nano.get("rg_idx") or 0),
            epoch=None if nano.get("epoch") is None else int(nano["epoch"]),
        )
    return None


def _experiment_of(meta: dict[str, Any]) -> str | None:
    run_config = meta.get("run_config")
    if isinstance(run_config, dict) and isinstance(run_config.get("experiment"), str):
        return run_config["experiment"]
    value = meta.get("experiment")
    return value if isinstance(value, str) else None
