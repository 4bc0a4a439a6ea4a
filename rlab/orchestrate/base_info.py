"""What the plan needs to know about the base checkpoint: its context length L0 and loader position.

Read from the base step's meta JSON (nanochat's or rlab's), so the default target length
(4 x L0) and the continuation's data start come from the checkpoint itself, not a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlab.core.checkpoint_meta import CheckpointMeta, load_meta
from rlab.errors import CheckpointError
from rlab.paths import BaseLayout, meta_file
from rlab.spec.run import DataStart


@dataclass(frozen=True)
class BaseInfo:
    """The facts of one base checkpoint step that shape the plan."""

    tag: str
    step: int
    data_start: DataStart | None
    """The recorded loader position; None when the base records none."""
    meta: CheckpointMeta
    """The whole meta (the memory plan reads its model shape and architecture)."""

    @property
    def sequence_len(self) -> int:
        """L0: the base's training context length."""
        return self.meta.sequence_len


def read_base_info(base: BaseLayout, tag: str, step: int) -> BaseInfo:
    """BaseInfo of `tag`@`step`; a CheckpointError naming the file when the meta is missing or unreadable."""
    path = meta_file(base.checkpoint_dir(tag), step)
    if not path.is_file():
        raise CheckpointError(
            f"No meta for {tag}@{step}: {path} does not exist.",
            "Check --base-dir, --base-tag and --from-step (`rlab ls` lists checkpoints).",
        )
    meta = load_meta(path)
    return BaseInfo(tag=tag, step=step, data_start=loader_position(meta, tag, step), meta=meta)


def loader_position(meta: CheckpointMeta, tag: str, step: int) -> DataStart | None:
    """The loader position a meta records: rlab's `loader_state`, else nanochat's `dataloader_state_dict`."""
    own = meta.loader_state
    if own is not None and own.ranks:
        return DataStart(source="rlab", tag=tag, step=step, loader_state=own.model_dump())
    nano = meta.dataloader_state_dict
    if nano is not None and nano.pq_idx is not None:
        return DataStart(
            source="nanochat",
            tag=tag,
            step=step,
            pq_idx=nano.pq_idx,
            rg_idx=nano.rg_idx or 0,
            epoch=nano.epoch,
        )
    return None
