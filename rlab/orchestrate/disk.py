"""Will a continue fit on the disk? An estimate of what it writes, a margin, and one verdict in MiB.

What a continue writes under `base_checkpoints/`: per tag, its clone of the base step (nothing when
the clone is a hard link, which `rlab.orchestrate.clone` makes whenever the filesystem allows), plus
the checkpoints its run saves, at most `keep_last + 1` at a time (the newest is written before the
oldest is pruned). Each saved checkpoint is counted at the base step's size (model, meta, optimizer).
The verdict compares the need with its margin, rounded up to a MiB, against the free space rounded
down to a MiB, and prints exactly those two numbers, so the message can never say "0.1 GB needed,
0.1 GB free".
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from rlab.orchestrate.clone import checkpoint_files
from rlab.spec.train import TrainSpec

DISK_MARGIN = 1.1
"""Free space needed = estimated bytes x this margin (logs, metrics, a partly written temp file)."""
MIB = 1 << 20


def checkpoint_bytes(ckpt_dir: Path, step: int) -> int:
    """Size of one step's files (model, meta, every optimizer shard)."""

    return sum(p.stat().st_size for p in checkpoint_files(ckpt_dir, step) if p.exists())


def saves_at_peak(train: TrainSpec) -> int:
    """Checkpoints a run holds on disk at once: every save (each `save_every` steps and the last one),
    or `keep_last` plus the one being written."""
    every = train.save_every
    saves = train.steps // every if every else 0
    if not every or train.steps % every:
        saves += 1  # the final save, unless it is also a periodic one
    if train.keep_last:
        saves = min(saves, train.keep_last + 1)
    return saves


def clones_are_links(root: Path) -> bool:
    """Whether a clone under `root` will be a hard link (probed with a small file, removed again)."""
    probe = root / f".rlab-link-probe-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"")
        try:
            os.link(probe, probe.with_suffix(".link"))
        except OSError:
            return False
        probe.with_suffix(".link").unlink()
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


@dataclass(frozen=True)
class DiskPlan:
    """What a continue writes and where: `need` bytes under `root`, `free` there."""

    tags: int
    clones: int
    """Tags whose clone is a copy (not a hard link, not resumed)."""
    saves: int
    """Checkpoints each run holds at its peak."""
    one: int
    """Bytes of one checkpoint."""
    free: int
    root: Path

    @property
    def need(self) -> int:
        return self.one * (self.clones + self.tags * self.saves)

    @property
    def needed_mib(self) -> int:
        """The need with its margin, rounded up to a MiB."""
        return math.ceil(self.need * DISK_MARGIN / MIB)

    @property
    def free_mib(self) -> int:
        """The free space, rounded down to a MiB."""
        return self.free // MIB

    @property
    def fits(self) -> bool:
        return self.needed_mib <= self.free_mib

    def problem(self) -> str | None:
        """The refusal, or None when it fits: both numbers as compared."""
        if self.fits:
            return None
        clones = f"{self.clones} copied clone(s) + " if self.clones else ""
        return (
            f"Not enough disk for {self.tags} tag(s) under {self.root}: {self.needed_mib:,} MiB needed "
            f"({clones}{self.saves} checkpoint(s) of {self.one / MIB:,.1f} MiB per tag, "
            f"+{round((DISK_MARGIN - 1) * 100)}% margin), {self.free_mib:,} MiB free. Free space, raise "
            "train.save_every / set train.keep_last, or run fewer variants."
        )


def plan_disk(train: TrainSpec, ckpt_dir: Path, step: int, tags: int, copied: int) -> DiskPlan:
    """The disk plan of `tags` runs from `ckpt_dir`@`step`, `copied` of which still need a clone."""
    root = ckpt_dir.parent
    clones = 0 if copied == 0 or clones_are_links(root) else copied
    return DiskPlan(
        tags=tags,
        clones=clones,
        saves=saves_at_peak(train),
        one=checkpoint_bytes(ckpt_dir, step),
        free=shutil.disk_usage(root).free,
        root=root,
    )
