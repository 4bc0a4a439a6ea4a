"""Clone one step of a base checkpoint into a variant's tag folder, and inspect tags, without torch.

A clone holds the base step's model and optimizer files and a *new* meta JSON that records
the variant's RoPE config and its lineage (parent tag and step). The weight files are
hard-linked when the filesystem allows it (O(1) whatever the checkpoint size), reflinked
(copy-on-write) when it does not but supports that, and copied otherwise. Linking is safe
because rlab never writes into an existing checkpoint file: every save writes a temp file and
renames it over the name, which replaces the link and leaves the source's inode alone. The
meta file is always written fresh, never linked, so the source's meta is never touched.

The clone is built in a hidden temp folder next to the target and renamed into place, so an
interrupted clone leaves no half-made tag behind.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rlab.core.checkpoint_meta import CheckpointMeta, read_meta, write_meta
from rlab.errors import CheckpointError, unknown_name_error
from rlab.paths import (
    BaseLayout,
    ExperimentLayout,
    checkpoint_steps,
    meta_file,
    model_file,
    name_problem,
    optim_file,
    optim_ranks,
)
from rlab.spec.rope import RopeSpec
from rlab.spec.run import Lineage

log = logging.getLogger(__name__)

CloneMethod = Literal["auto", "hardlink", "reflink", "copy"]
_FICLONE = 0x40049409  # Linux ioctl: share the source's extents (btrfs, xfs, ...)


def list_tags(base: BaseLayout) -> list[str]:
    """Tags (checkpoint folders) under the base dir, sorted; hidden temp folders are skipped."""
    root = base.checkpoints_root
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and name_problem("tag", p.name) is None)


def checkpoint_files(ckpt_dir: Path, step: int) -> list[Path]:
    """The files of one step: model, meta and every optimizer shard (every rank's present)."""
    shards = [optim_file(ckpt_dir, step, rank) for rank in optim_ranks(ckpt_dir, step)]
    return [model_file(ckpt_dir, step), meta_file(ckpt_dir, step), *shards]


@dataclass(frozen=True)
class TagFlags:
    """How a command names a tag and its step: what its checkpoint errors call them and which flag changes them."""

    noun: str
    tag_flag: str
    step_flag: str
    make: str
    """How to make a tag when there is none."""


BASE_TAG = TagFlags("base tag", "--base-tag", "--from-step", "train a base with `rlab pretrain`")


def require_checkpoint(base: BaseLayout, tag: str, step: int | None, flags: TagFlags = BASE_TAG) -> Path:
    """The folder of `tag`, after checking it exists and holds `step` (None: any); errors list what does exist."""
    ckpt_dir = base.checkpoint_dir(tag)
    if not ckpt_dir.is_dir():
        tags = list_tags(base)
        if not tags:
            raise CheckpointError(
                f"{flags.noun.capitalize()} '{tag}' not found: {base.checkpoints_root} has no checkpoints.",
                f"Check --base-dir (or $RLAB_BASE_DIR / $NANOCHAT_BASE_DIR), or {flags.make}.",
            )
        error = unknown_name_error(flags.noun, tag, tags, CheckpointError)
        raise CheckpointError(
            f"{error.message} (in {base.checkpoints_root})",
            f"Choose one with {flags.tag_flag} (`rlab ls` lists them).",
        )
    steps = checkpoint_steps(ckpt_dir)
    if step is not None and step not in steps:
        found = ", ".join(str(s) for s in steps) or "none"
        raise CheckpointError(
            f"No checkpoint for step {step} in {ckpt_dir} (found: {found}).",
            f"Choose one with {flags.step_flag}.",
        )
    return ckpt_dir


@dataclass(frozen=True)
class CloneResult:
    """What a clone did: where, how (hardlink/reflink/copy), how many bytes, how long."""

    tag: str
    path: Path
    method: str
    files: int
    bytes: int
    seconds: float


def clone_checkpoint(
    base: BaseLayout,
    src_tag: str,
    step: int,
    dst_tag: str,
    *,
    rope: RopeSpec,
    variant: str,
    method: CloneMethod = "auto",
    experiment: str | None = None,
    sequence_len: int | None = None,
) -> CloneResult:
    """Clone `src_tag`'s `step` into the new tag `dst_tag` (which must not exist).

    The clone's meta is the source's plus ``tag``, ``variant``, ``rope`` (with original_len
    filled from the source), ``lineage`` = {parent_tag, parent_step} and ``experiment`` (the
    experiment that owns the new tag); `sequence_len`, when given, is the clone's context length
    (see `clone_meta`).
    """
    t0 = time.perf_counter()
    src_dir = require_checkpoint(base, src_tag, step)
    dst_dir = base.checkpoint_dir(dst_tag)
    if dst_dir.exists():
        raise CheckpointError(f"Tag '{dst_tag}' already exists: {dst_dir}.", "Use --resume or --force.")
    meta = read_meta(src_dir, step)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst_tag}.clone-", dir=base.checkpoints_root))
    tmp.chmod(src_dir.stat().st_mode & 0o777)  # mkdtemp makes it 0700; a tag folder looks like its source
    used: set[str] = set()
    total = 0
    try:
        files = checkpoint_files(src_dir, step)
        for src in files:
            if src == meta_file(src_dir, step):
                continue
            used.add(_link_or_copy(src, tmp / src.name, method))
            total += src.stat().st_size
        new_meta = clone_meta(
            meta,
            src_tag=src_tag,
            step=step,
            dst_tag=dst_tag,
            rope=rope,
            variant=variant,
            experiment=experiment,
            sequence_len=sequence_len,
        )
        write_meta(tmp, step, new_meta)
        total += meta_file(tmp, step).stat().st_size
        os.rename(tmp, dst_dir)  # atomic on one filesystem; fails if dst_dir appeared meanwhile
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    how = "/".join(sorted(used)) or "copy"
    seconds = time.perf_counter() - t0
    log.info(
        "cloned %s step %d -> %s (%s, %d files, %.1f MB, %.3fs)",
        src_tag,
        step,
        dst_tag,
        how,
        len(files),
        total / 1e6,
        seconds,
    )
    return CloneResult(dst_tag, dst_dir, how, len(files), total, seconds)


def clone_meta(
    meta: CheckpointMeta,
    *,
    src_tag: str,
    step: int,
    dst_tag: str,
    rope: RopeSpec,
    variant: str,
    experiment: str | None = None,
    sequence_len: int | None = None,
) -> CheckpointMeta:
    """The clone's meta: the source's, with the new tag, variant, RoPE config, lineage and owning experiment.

    What the variant leaves to the checkpoint (L0, the rotary base) is filled from the source, so a base
    trained with its own rotary base keeps it in every clone; a nanochat source records no base, and its
    clones take the architecture's, as it does.

    `sequence_len` sets model_config.sequence_len, after L0 has been taken from the source's. A
    training-free arm is the variant *at the target length*: a nanochat-2026 model's attention windows
    follow sequence_len, so an arm left at L0 would never attend further than L0 back, whatever its
    RoPE, unlike the continued arm it is compared with."""
    parent_rope = meta.rope
    original_len = (parent_rope.original_len if parent_rope is not None else None) or meta.sequence_len
    rope = rope.with_original_len(original_len)
    if parent_rope is not None and parent_rope.base:
        rope = rope.with_base(parent_rope.base)
    update: dict[str, object] = dict(
        tag=dst_tag,
        variant=variant,
        rope=rope,
        parent_rope=parent_rope,
        lineage=Lineage(parent_tag=src_tag, parent_step=step),
        experiment=experiment,
    )
    if sequence_len is not None:
        update["shape"] = meta.shape.model_copy(update={"sequence_len": int(sequence_len)})
    return meta.model_copy(update=update)


def _link_or_copy(src: Path, dst: Path, method: CloneMethod) -> str:
    """Put `src` at `dst` by the cheapest means allowed; returns the means used."""
    if method in ("auto", "hardlink"):
        try:
            os.link(src, dst)
            return "hardlink"
        except OSError as exc:
            if method == "hardlink":
                raise CheckpointError(f"Cannot hard-link {src} -> {dst}: {exc.strerror}.") from None
            log.debug("hard link failed (%s); trying reflink", exc)
    if method in ("auto", "reflink"):
        try:
            _reflink(src, dst)
            return "reflink"
        except OSError as exc:
            if method == "reflink":
                raise CheckpointError(f"Cannot reflink {src} -> {dst}: {exc.strerror}.") from None
            log.debug("reflink failed (%s); copying", exc)
    shutil.copy2(src, dst)
    return "copy"


def _reflink(src: Path, dst: Path) -> None:
    import fcntl  # noqa: PLC0415 - optional dependency (fcntl)

    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
        except OSError:
            fout.close()
            dst.unlink(missing_ok=True)
            raise
    shutil.copystat(src, dst)


# --- an existing tag: refuse, resume or replace -------------------------------------------------------

TagAction = Literal["clone", "resume", "replace", "refuse"]


def tag_action(exists: bool, *, resume: bool, force: bool) -> TagAction:
    """What `rlab continue` does with a variant's tag; an existing tag needs --resume or --force."""
    if resume and force:
        raise CheckpointError("--resume and --force contradict each other.", "Give one of them.")
    if not exists:
        return "clone"
    if resume:
        return "resume"
    if force:
        return "replace"
    return "refuse"  # the caller raises tag_exists_error


def tag_exists_error(base: BaseLayout, tag: str, variant: str) -> CheckpointError:
    steps = ", ".join(str(s) for s in checkpoint_steps(base.checkpoint_dir(tag))) or "none complete"
    return CheckpointError(
        f"Tag '{tag}' already exists in {base.checkpoints_root} (steps: {steps}).",
        f"Continue it with --resume, or replace it with --force (deletes it); or pick other --variants than "
        f"'{variant}'.",
    )


def tag_paths(base: BaseLayout, layout: ExperimentLayout, tag: str) -> list[Path]:
    """Everything that belongs to a tag and that --force deletes: its checkpoints, run folder and evals."""
    return [p for p in (base.checkpoint_dir(tag), layout.run_dir(tag), layout.eval_dir(tag)) if p.exists()]


def describe_paths(paths: list[Path]) -> list[str]:
    """Human lines for `paths`: folder, file count and size."""
    lines = []
    for path in paths:
        files = [p for p in path.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        lines.append(f"{path} ({len(files)} files, {size / 1e6:.1f} MB)")
    return lines


def remove_paths(paths: list[Path]) -> None:
    """Delete folders (checkpoints of a replaced tag). Hard links to a base are unlinked, never the base."""
    for path in paths:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
