"""metrics.jsonl: one training record per line (train | eval | done | failed), one stream per tag."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from rlab.records.base import ContractError, Record, first_error


class MetricsBase(Record):
    """NaN and inf are kept as JSON constants (a skipped step's loss is NaN, and that is information)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="constants")


class TrainRecord(MetricsBase):
    type: Literal["train"] = "train"
    step: int
    start_step: int
    end_step: int
    loss: float
    lr_mult: float
    grad_norm: float
    tokens: int
    tokens_per_s: float
    flops_per_s: float
    mfu: float | None = None
    skipped: int
    peak_mem_mb: float
    rank_losses: list[float] | None = None
    skip_reason: str | None = None
    time: float


class EvalRecord(MetricsBase):
    type: Literal["eval"] = "eval"
    step: int
    val_bpb: float | None
    peak_mem_mb: float | None = None
    time: float


class DoneRecord(MetricsBase):
    type: Literal["done"] = "done"
    step: int
    skipped: int | None = None
    val_bpb: float | None = None
    time: float


class FailedRecord(MetricsBase):
    type: Literal["failed"] = "failed"
    step: int | None
    error: str
    kind: Literal["diverged", "stalled"] | None = None
    """How it failed when that is more than an error: a dead run (`rlab.core.divergence`), or a rank the
    watchdog found silent (`rlab.orchestrate.heartbeat`)."""
    time: float


MetricsRecord = Annotated[TrainRecord | EvalRecord | DoneRecord | FailedRecord, Field(discriminator="type")]
_METRICS_ADAPTER: TypeAdapter[TrainRecord | EvalRecord | DoneRecord | FailedRecord] = TypeAdapter(
    MetricsRecord
)


def metrics_record(data: dict[str, Any]) -> TrainRecord | EvalRecord | DoneRecord | FailedRecord:
    """Validate one metrics.jsonl record (a dict with `type`)."""
    return _METRICS_ADAPTER.validate_python(data)


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one validated record (with `time`) as one line: written in one call, and a failed write is cut back
    off, so the file never keeps a torn line."""

    checked = metrics_record({**record, "time": record.get("time", time.time())})
    append_line(Path(path), checked.model_dump_json() + "\n")


def append_line(path: Path, line: str) -> None:
    """`line` appended to `path` whole or not at all (a full disk: the partial line is truncated away, and the
    OSError names the file)."""

    data = line.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(
                    errno.ENOSPC, os.strerror(errno.ENOSPC)
                )  # a short write: the disk filled mid-line
        except OSError as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        os.close(fd)


def read_metrics_records(path: Path) -> list[TrainRecord | EvalRecord | DoneRecord | FailedRecord]:
    """Every record of a metrics.jsonl. A torn last line (a job still writing) is skipped; any other bad
    line is a ContractError naming the file and line."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(_METRICS_ADAPTER.validate_json(line))
        except ValidationError as exc:
            if i == len(lines) and not line.rstrip().endswith("}"):
                break  # torn last line
            raise ContractError(f"{path}:{i} is not a metrics record: {first_error(exc)}.") from None
    return out
