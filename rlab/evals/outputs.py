"""Writing eval outputs: atomic JSON and CSV files, and the eval.json / CSV schemas.

Every file is written to a unique temporary file in the destination folder, flushed and fsynced,
then renamed over the destination (`os.replace` is atomic on POSIX). A reader therefore sees
either the old or the new file, never a half-written one, and two evals finishing at once each
replace their own files without losing the other's. Re-running an eval replaces its files.

Schemas (docs/architecture.md "Evals"):
    eval.json            EVAL_SCHEMA, one object with every metric of one tag
    bpb_by_length.csv    length,bpb,ci_low,ci_high,tokens,docs
    passkey.csv          length,depth,accuracy,n
    core_examples.csv    task,index,correct
    bpb_units.csv        metric,unit,nats,bytes
    copy_distance.csv    window,distance,record,first_nats,copy_nats,copy_acc,tokens
    results_<variant>.csv  task,type,accuracy,centered,baseline,n   (per-task CORE of one variant)
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rlab.atomic_io import write_bytes_atomic

EVAL_SCHEMA = "rlab.eval/1"

BPB_BY_LENGTH_COLUMNS = ("length", "bpb", "ci_low", "ci_high", "tokens", "docs")
PASSKEY_COLUMNS = ("length", "depth", "accuracy", "n")
CORE_EXAMPLES_COLUMNS = ("task", "index", "correct")
BPB_UNITS_COLUMNS = ("metric", "unit", "nats", "bytes")
CORE_TASK_COLUMNS = ("task", "type", "accuracy", "centered", "baseline", "n")

EVAL_JSON = "eval.json"
BPB_BY_LENGTH_CSV = "bpb_by_length.csv"
PASSKEY_CSV = "passkey.csv"
CORE_EXAMPLES_CSV = "core_examples.csv"
BPB_UNITS_CSV = "bpb_units.csv"
COPY_DISTANCE_CSV = "copy_distance.csv"  # columns: rlab.evals.copy_distance.COLUMNS




def _json_safe(value: Any) -> Any:
    """NaN/inf are not JSON: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write_json_atomic(path: Path, obj: Any) -> None:
    text = json.dumps(_json_safe(obj), indent=2, sort_keys=False, allow_nan=False)
    write_bytes_atomic(path, (text + "\n").encode("utf-8"))


def write_csv_atomic(path: Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"{path.name}: row {row!r} does not match columns {columns}")
        writer.writerow(["" if isinstance(v, float) and not math.isfinite(v) else v for v in row])
    write_bytes_atomic(path, buf.getvalue().encode("utf-8"))
