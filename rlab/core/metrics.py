"""Training metrics: the JSONL record stream, throughput / MFU arithmetic, memory, progress bar.

`runs/<tag>/metrics.jsonl` is the source of truth for plots and the orchestrator's live table:
one JSON object per line (`type` = train | eval | done | failed; the models are `rlab.records`),
validated, appended and flushed by rank 0 only. One record stream per tag: a fresh run replaces the
file, a resumed run keeps the train/eval records up to the step it resumes from and continues them
(records past that step, and done/failed markers, belonged to the interrupted attempt and go).

MFU = achieved FLOP/s / peak FLOP/s, with achieved = tokens/s x FLOPs per token (forward +
backward, `GPT.estimate_flops`). The peak comes from the config, else from a small table of
known GPUs' dense bf16 peaks; on a CPU (no trustworthy spec sheet) MFU is null and achieved
FLOP/s is what gets reported; `measure_matmul_peak` gives a same-machine reference for benchmarks.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from rlab.atomic_io import write_text_atomic
from rlab.records.base import ContractError
from rlab.records.metrics_log import append_record, read_metrics_records

logger = logging.getLogger(__name__)

# Dense bf16 peak FLOP/s of common accelerators (spec sheets, no sparsity).
KNOWN_PEAK_FLOPS = {
    "H200": 989e12,
    "H100": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "A10G": 125e12,
    "RTX 4090": 165e12,
    "RTX 3090": 71e12,
}


def device_peak_flops(device: Any, override: float | None = None) -> float | None:
    """Peak FLOP/s for MFU: the configured value, a known GPU's bf16 peak, else None."""
    if override is not None:
        return override
    if getattr(device, "type", str(device)) != "cuda":
        return None
    import torch

    name = torch.cuda.get_device_name(device)
    for key, peak in KNOWN_PEAK_FLOPS.items():
        if key.lower() in name.lower():
            return peak
    logger.info("unknown GPU %r: set train.peak_flops to get MFU", name)
    return None


def measure_matmul_peak(dtype: Any, n: int = 1024, seconds: float = 1.0, device: Any = "cpu") -> float:
    """Best observed FLOP/s of an n x n x n matmul in `dtype` on `device` (a same-run reference peak)."""
    import torch

    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(2):  # warm-up (kernel selection, caches)
        a @ b
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        a @ b
        if getattr(device, "type", str(device)) == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


class MemoryMeter:
    """Peak memory in MB since the last reset: CUDA allocator peak, or the process's peak RSS on CPU.

    CPU peak RSS cannot be reset, so on CPU the "interval peak" is the peak so far.
    """

    def __init__(self, device: Any) -> None:
        self.cuda = getattr(device, "type", str(device)) == "cuda"
        self.device = device

    def peak_mb(self) -> float:
        if self.cuda:
            import torch

            return torch.cuda.max_memory_allocated(self.device) / 2**20
        import resource  # noqa: PLC0415 - optional dependency (resource)

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return rss / 2**20 if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux

    def reset(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.reset_peak_memory_stats(self.device)

    def release_cached(self) -> None:
        """Give cached accelerator memory back (after evals on the uncompiled model)."""
        if self.cuda:
            import torch

            torch.cuda.empty_cache()


class MetricsWriter:
    """Writes one validated record per line to `metrics.jsonl`; a no-op when disabled (rank != 0).

    `resumed_from=None` starts a fresh stream (the file is replaced); a step continues the stream kept up
    to that step; `append=True` only adds lines (a failure note before any run started).
    """

    def __init__(self, path: Path | None, *, resumed_from: int | None = None, append: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not append:
            kept = [] if resumed_from is None else records_through(self.path, resumed_from)

            write_text_atomic(self.path, "".join(r.model_dump_json() + "\n" for r in kept))

    def write(self, record: dict[str, Any]) -> None:
        """One record, one line, whole or not at all (`rlab.records.metrics_log.append_record`: a full disk never
        leaves a torn line, and its error names this file)."""
        if self.path is None:
            return

        append_record(self.path, record)

    def close(self) -> None:
        """Nothing is held open between records (kept for the callers' symmetry)."""


def records_through(path: Path, step: int) -> list:
    """The train/eval records of `path` up to `step` (what a run resumed at `step` continues)."""

    if not Path(path).is_file():
        return []
    try:
        records = read_metrics_records(path)
    except ContractError as exc:
        logger.warning("%s; starting a new metrics stream", exc.message)
        return []
    return [r for r in records if r.type in ("train", "eval") and r.step <= step]


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All records of a metrics file as dicts (tests, report); a torn last line is ignored."""

    return [r.model_dump() for r in read_metrics_records(path)]


class TrainProgress:
    """Rich progress bar with ETA (rank 0 only; a null object elsewhere)."""

    def __init__(self, enabled: bool, start: int, end: int, tag: str) -> None:
        self._progress = None
        if not enabled:
            return

        console = Console(stderr=True)
        self._progress = Progress(
            TextColumn(f"[bold]{tag}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            transient=False,
            disable=not console.is_terminal,  # logs carry the numbers when stderr is a file
        )
        self._task = self._progress.add_task("train", total=end - start, completed=0, info="")
        self._progress.start()

    def update(self, done: int, info: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done, info=info)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
