"""CSV files: one row model per file (its `columns` in file order), written and read through it.

Empty cells are null, non-finite numbers are written empty; unknown or missing columns are a ContractError.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from rlab.atomic_io import write_text_atomic
from rlab.records.base import ContractError, Record, first_error

R = TypeVar("R", bound=Record)


def _cell(value: Any) -> Any:
    return "" if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


def write_rows(path: Path, rows: Iterable[Record], columns: Sequence[str] | None = None) -> None:
    """A CSV of the rows' `columns` (default: the model's), atomically."""

    rows = list(rows)
    if columns is None:
        if not rows:
            raise ValueError(f"{path.name}: no rows and no columns")
        columns = type(rows[0]).columns

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        data = row.model_dump()
        writer.writerow([_cell(data.get(c)) for c in columns])
    write_text_atomic(path, buf.getvalue())


def read_rows(path: Path, cls: type[R], columns: Sequence[str] | None = None) -> list[R]:
    """A CSV written by `write_rows`, validated row by row against `cls`; ContractError when it does not match."""
    columns = tuple(columns or cls.columns)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"Cannot read {path} ({type(exc).__name__}).") from None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != columns:
        raise ContractError(
            f"{path} has columns {', '.join(reader.fieldnames or [])}; expected {', '.join(columns)}.",
            "Re-run `rlab eval` for this tag.",
        )
    records = [{k: (None if v == "" else v) for k, v in r.items() if k in cls.model_fields} for r in reader]
    try:
        return TypeAdapter(list[cls]).validate_python(records)  # type: ignore[valid-type]
    except ValidationError as exc:
        raise ContractError(
            f"{path} does not match its contract: {first_error(exc)}.", "Re-run `rlab eval` for this tag."
        ) from None
