"""metrics.jsonl holds one record stream per tag: a fresh run replaces it, a resume continues it."""

from __future__ import annotations

import errno
import math
import os

import pytest

from rlab.core.metrics import MetricsWriter
from rlab.errors import os_error
from rlab.records.base import ContractError
from rlab.records.metrics_log import read_metrics_records

pytestmark = pytest.mark.usefixtures("one_thread")


def _train(step: int, loss: float = 2.0) -> dict:
    return {
        "type": "train",
        "step": step,
        "start_step": 0,
        "end_step": 10,
        "loss": loss,
        "lr_mult": 1.0,
        "grad_norm": 0.5,
        "tokens": 64,
        "tokens_per_s": 1.0,
        "flops_per_s": 1.0,
        "skipped": 0,
        "peak_mem_mb": 0.0,
    }


def _write(path, records, **kw) -> None:
    w = MetricsWriter(path, **kw)
    for r in records:
        w.write(r)
    w.close()


def _steps(path) -> list[tuple[str, int | None]]:
    return [(r.type, r.step) for r in read_metrics_records(path)]


def test_fresh_run_replaces_and_resume_continues_the_stream(tmp_path):
    path = tmp_path / "metrics.jsonl"
    first = [_train(s) for s in (1, 2, 3, 4)] + [{"type": "eval", "step": 4, "val_bpb": 1.5}]
    _write(path, [*first, {"type": "failed", "step": 5, "error": "killed"}])
    # resumed from the step-3 checkpoint: records after step 3 (and the failure note) go, new ones follow
    _write(path, [_train(4, 1.9), _train(5), {"type": "done", "step": 5}], resumed_from=3)
    assert _steps(path) == [("train", 1), ("train", 2), ("train", 3), ("train", 4), ("train", 5), ("done", 5)]
    assert read_metrics_records(path)[3].loss == 1.9  # step 4 once, from the run that continued
    # a failure before the run starts only adds a note
    _write(path, [{"type": "failed", "step": None, "error": "bad spec"}], append=True)
    assert _steps(path)[-1] == ("failed", None) and len(_steps(path)) == 7
    # a fresh run (after --force) starts over
    _write(path, [_train(1, 3.0)])
    assert _steps(path) == [("train", 1)]


def test_records_are_validated_and_nan_survives(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _write(path, [_train(1, float("nan"))])
    assert math.isnan(read_metrics_records(path)[0].loss)
    with pytest.raises(Exception, match="loss"):
        _write(tmp_path / "other.jsonl", [{**_train(1), "loss": "high"}])
    path.write_text(
        path.read_text() + '{"type": "train", "st'
    )  # a job still writing: the torn line is skipped
    assert _steps(path) == [("train", 1)]
    path.write_text('{"type": "bogus"}\n' + path.read_text())
    with pytest.raises(ContractError, match="metrics.jsonl"):
        read_metrics_records(path)


def test_a_full_disk_never_leaves_a_torn_line_and_the_error_names_the_file(tmp_path, monkeypatch):
    """Finding 5: one of two runs on a full results disk left metrics.jsonl with a torn last line, and the message
    named no file ("No space left writing a file") with the free space of another disk."""

    path = tmp_path / "metrics.jsonl"
    writer = MetricsWriter(path)
    writer.write(_train(1))
    real_write = os.write

    def half_then_full(fd, data):  # the disk fills mid-line: part of it lands, then ENOSPC
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError) as info:
        writer.write(_train(2))
    monkeypatch.setattr(os, "write", real_write)
    assert info.value.filename == str(path)
    assert _steps(path) == [("train", 1)] and path.read_text().endswith("}\n")  # the partial line cut away
    writer.write(_train(2))  # the disk freed: the stream goes on, whole lines only
    assert _steps(path) == [("train", 1), ("train", 2)]
    message = os_error(info.value).message
    assert message.startswith(f"No space left writing {path} (") and "free there)" in message
    nameless = os_error(OSError(errno.ENOSPC, "No space left on device")).message
    assert (
        nameless == "No space left writing a file (the OS named none)."
    )  # no other disk's free space guessed
