"""How a number was produced: which code, on which checkpoint, with which settings."""

from __future__ import annotations

from typing import Any

from rlab.records.base import Record


class CodeVersion(Record):
    """Which code produced a file: the git commit of rlab's checkout and whether it had local changes."""

    package: str
    """rlab's package version."""
    git_sha: str | None = None
    """Full commit SHA of the checkout rlab ran from; null when not run from a git checkout."""
    dirty: bool | None = None
    """True when tracked files differed from that commit."""
    diff_hash: str | None = None
    """sha256 (12 hex) of `git diff HEAD` when dirty: equal hashes mean the same local changes."""

    @property
    def label(self) -> str:
        """`0.1.0` (no checkout), `g1a2b3c4d5e6`, or `g1a2b3c4d5e6+dirty.<diff hash>`."""
        if not self.git_sha:
            return self.package
        return f"g{self.git_sha[:12]}" + (f"+dirty.{self.diff_hash or 'unknown'}" if self.dirty else "")


class SectionRun(Record):
    """How one eval section was measured. Sections of one eval.json may come from different runs."""

    code_version: CodeVersion
    world_size: int
    dtype: str
    """Compute dtype of the forward passes: float32, or bfloat16 under autocast."""
    settings: dict[str, Any]
    """The eval settings this section depends on (`rlab.evals.definition.EvalDefinition.settings_of`)."""
    settings_hash: str
    data_hash: str | None = None
    """sha256 (12 hex) of what was scored (document ids and text hashes, task files, ...)."""
    seconds: float
    finished_at: str
    """UTC time, ISO 8601."""


class CheckpointFacts(Record):
    """What the evaluated checkpoint's meta says about its training (the budget the report checks)."""

    step: int
    meta_sha256: str
    """sha256 (16 hex) of the checkpoint's meta file: identifies the checkpoint beyond its step."""
    tokens_trained: int | None = None
    skipped_steps: int | None = None
    data_start: str | None = None
    """Where the run's data began (e.g. `after_base`, `beginning`); null when the meta does not say."""
    seed: int | None = None
    """Training seed."""
    train_code_version: str | None = None
    """`CodeVersion.label` recorded by the training run (null for checkpoints written elsewhere)."""
    train_world_size: int | None = None
    train_dtype: str | None = None
