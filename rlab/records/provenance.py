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


class Platform(Record):
    """Where a number was computed: the facts that change its digits, not what it measures.

    The same code and data give other digits under another dtype, CPU kernel set (ISA), torch build or
    intra-op thread count (reduction order); after training, a few percent (`docs/reproducibility.md`).
    """

    device: str
    """`cpu`, or the CUDA device's name."""
    cpu: str
    """The CPU's model name (/proc/cpuinfo), or `platform.processor()` elsewhere."""
    isa: list[str]
    """The CPU's instruction sets among `rlab.provenance.NUMERIC_ISA` (avx2, avx512f, avx512_bf16, amx_bf16, ...)."""
    kernels: str
    """The CPU kernel set torch dispatches to (`torch.backends.cpu.get_cpu_capability()`: AVX512, AVX2, ...)."""
    torch: str
    """torch's version (its build, e.g. `2.13.0+cpu`)."""
    threads: int
    """Intra-op threads of the process (`torch.get_num_threads()`; torchrun sets 1 per rank by default)."""

    @property
    def label(self) -> str:
        """One line: `cpu AMD EPYC 9B14 (AVX512: avx2, avx512_bf16), torch 2.13.0, 1 thread`; on a GPU its name
        alone (`NVIDIA H200, torch ...`): the host CPU's kernels do not compute its numbers."""
        threads = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        if self.device != "cpu":
            return f"{self.device}, torch {self.torch}, {threads}"
        isa = f" ({self.kernels}: {', '.join(self.isa)})" if self.isa else f" ({self.kernels})"
        return f"cpu {self.cpu}{isa}, torch {self.torch}, {threads}"


class SectionRun(Record):
    """How one eval section was measured. Sections of one eval.json may come from different runs."""

    code_version: CodeVersion
    world_size: int
    dtype: str
    """Compute dtype of the forward passes: float32, or bfloat16 under autocast."""
    platform: Platform | None = None
    """The machine it ran on (rank 0's); null in eval.json written before rlab recorded it."""
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
    train_platform: Platform | None = None
    """The machine the checkpoint was trained on (rank 0's, as its meta records it)."""
