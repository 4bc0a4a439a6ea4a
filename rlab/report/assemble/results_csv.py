"""Write results.csv safely: merge by (experiment, tag), stable column order, atomic, under a file lock.

Several `rlab report` (or eval) processes may finish at once. Each one, under an exclusive lock,
re-reads the current file, replaces the rows of the tags it has fresh numbers for, keeps the others,
and swaps a complete temp file in with `os.replace` — so a reader never sees a half-written file,
a row is never duplicated, and a row another process wrote is never lost.

Cells are written as text with one formatter (`format_cell`), so the same numbers always give the
same bytes: re-running the report on unchanged outputs leaves results.csv byte-identical.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd
from filelock import FileLock
from pydantic import ValidationError

from rlab.atomic_io import write_text_atomic
from rlab.errors import RlabError
from rlab.records.results_row import ResultsRow
from rlab.report.assemble.wide import order_columns

log = logging.getLogger(__name__)

KEY = ("experiment", "tag")
LOCK_TIMEOUT_S = 120.0


def format_cell(value: object) -> str:
    """One canonical text form per value: blanks for missing, shortest round-trip repr for floats."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if hasattr(value, "item"):  # numpy scalars
        return format_cell(value.item())
    return str(value)


def to_text(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every cell formatted by `format_cell`."""
    return pd.DataFrame(
        {c: [format_cell(v) for v in frame[c].tolist()] for c in frame.columns},
        columns=list(frame.columns),
        dtype=object,
    )


def lock_for(path: Path):
    """The inter-process lock guarding `path` (a sibling ``.<name>.lock`` file)."""

    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path.parent / f".{path.name}.lock"), timeout=LOCK_TIMEOUT_S)


def merge_rows(existing: pd.DataFrame | None, fresh: pd.DataFrame) -> pd.DataFrame:
    """Text frames: `fresh` rows replace existing rows with the same key; other rows are kept."""
    if existing is None or existing.empty:
        merged = fresh
    else:
        fresh_keys = set(zip(*(fresh[k] for k in KEY), strict=True))
        keep = [tuple(r) not in fresh_keys for r in existing[list(KEY)].itertuples(index=False)]
        kept = existing[keep]
        if len(kept):
            log.info("results.csv: keeping %d row(s) of tags not in this report", len(kept))
        merged = pd.concat([kept, fresh], ignore_index=True).fillna("")
        # A column that only stale rows had and that is now blank everywhere goes away.
        merged = merged[[c for c in merged.columns if c in fresh.columns or (merged[c] != "").any()]]
    merged = merged[order_columns(list(merged.columns))]
    return merged.sort_values(list(KEY), kind="stable").reset_index(drop=True)


def check_rows(frame: pd.DataFrame) -> None:
    """Every row through `rlab.records.results_row.ResultsRow` (identity and provenance columns typed)."""

    for row in frame.to_dict("records"):
        try:
            ResultsRow.model_validate(row)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise RlabError(
                f"results.csv row of {row.get('tag')!r} breaks its contract: {err['msg']} "
                f"({'.'.join(map(str, err['loc']))})."
            ) from None


def write_results_csv(path: Path, results: pd.DataFrame) -> pd.DataFrame:
    """Merge `results` into the CSV at `path` atomically under its lock; returns the text frame written."""
    fresh = to_text(results)
    with lock_for(path):
        existing = None
        if path.is_file():
            try:
                existing = pd.read_csv(path, dtype=str, keep_default_na=False)
            except (OSError, ValueError) as exc:
                log.warning("results.csv unreadable (%s); rewriting it from this report only", exc)
            if existing is not None and not set(KEY) <= set(existing.columns):
                existing = None
        merged = merge_rows(existing, fresh)
        check_rows(merged)
        write_text_atomic(path, merged.to_csv(index=False, lineterminator="\n"))
    return merged
