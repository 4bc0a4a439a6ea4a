"""What a continue's workers will read, opened before anything is cloned or launched.

The base checkpoint (meta, file, keys, every tensor finite), each resumed tag's checkpoint, the
tokenizer (and that its vocabulary fits the model), and the footer of every parquet shard: a problem
is one `RlabError` naming the file, found in a second instead of after cloning and 15 s of torchrun.
A resumed tag whose newest checkpoint is broken gets a way out: the command that resumes it from its
newest readable step (`--resume-from`, which sets the newer steps aside, never deletes them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlab.core.shards import check_shards
from rlab.errors import CheckpointError, DataError, RlabError
from rlab.paths import BaseLayout, checkpoint_steps
from rlab.spec.run import RunConfig


def input_problems(
    base: BaseLayout,
    base_tag: str,
    step: int,
    resumed: list[RunConfig],
    *,
    resume_from: int | None,
    rerun: Callable[[str], str],
) -> list[RlabError]:
    """Every input a run reads that is missing, unreadable or wrong; `resumed` are the runs that resume
    their own tag, `rerun(variant)` the command that resumes one (for the way out of a broken checkpoint)."""
    from rlab.core.checkpoint import verify_checkpoint  # noqa: PLC0415 - defers numpy, torch
    from rlab.core.tokenizer import check_tokenizer  # noqa: PLC0415 - defers numpy

    problems: list[RlabError] = []
    vocab_size = None
    try:
        info = verify_checkpoint(base.checkpoint_dir(base_tag), step)
        vocab_size = info.config.vocab_size
    except RlabError as exc:
        problems.append(exc)
    try:
        tokens = check_tokenizer(base.tokenizer_dir)
        if vocab_size is not None and tokens > vocab_size:
            problems.append(
                DataError(
                    f"The tokenizer in {base.tokenizer_dir} has {tokens:,} tokens, more than the model's "
                    f"vocab_size {vocab_size:,} ({base_tag}@{step}): its ids would fall outside the embedding.",
                    "Use the tokenizer the base was trained with (--base-dir).",
                )
            )
    except RlabError as exc:
        problems.append(exc)
    try:
        check_shards(base.data_dir)
    except RlabError as exc:
        problems.append(exc)
    for run in resumed:
        problem = resume_problem(base.checkpoint_dir(run.tag), resume_from, rerun(run.variant))
        if problem is not None:
            problems.append(problem)
    return problems


def resume_problem(ckpt_dir: Path, resume_from: int | None, rerun: str) -> RlabError | None:
    """Why the checkpoint a resume reads (`resume_from`, else the newest) cannot be read, with the way out
    (`rerun` is the command that resumes the tag)."""
    from rlab.core.checkpoint import verify_checkpoint  # noqa: PLC0415 - defers numpy, torch

    steps = checkpoint_steps(ckpt_dir)
    if not steps:
        return None  # nothing of this run yet: it starts from its clone
    if resume_from is not None and resume_from not in steps:
        return CheckpointError(
            f"--resume-from {resume_from}: {ckpt_dir} has no checkpoint at that step (found: "
            f"{', '.join(map(str, steps))}).",
            "Choose one of them.",
        )
    step = resume_from if resume_from is not None else steps[-1]
    try:
        verify_checkpoint(ckpt_dir, step)
        return None
    except RlabError as exc:
        broken = exc
    for earlier in reversed([s for s in steps if s < step]):
        try:
            verify_checkpoint(ckpt_dir, earlier)
        except RlabError:
            continue
        newer = ", ".join(str(s) for s in steps if s > earlier)
        return CheckpointError(
            broken.message,
            f"Resume from step {earlier}, the newest readable one (step(s) {newer} are moved to "
            f"{ckpt_dir / 'set_aside'}, not deleted): {rerun} --resume-from {earlier}",
        )
    return CheckpointError(
        broken.message, "No readable checkpoint of this tag is left: re-clone it with --force."
    )
