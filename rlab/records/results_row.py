"""results.csv: one row per tag, identity and provenance columns typed, metric columns added by the report."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, field_validator

from rlab.records.base import Record, short_hash
from rlab.records.eval_doc import EvalDoc

ResultCell = float | int | bool | str | None


class ResultsRow(Record):
    """One row of results.csv. The fixed fields are identity and provenance; the report adds metric and
    comparison columns (`<metric>`, `<metric>_ci_low`, `..._vs_<baseline>...`) as extra fields."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    experiment: str
    tag: str
    variant: str
    step: int | None = None
    train_seq_len: int | None = None
    tokens_trained: int | None = None
    skipped_steps: int | None = None
    data_start: str | None = None
    seed: int | None = None
    dtype: str | None = None
    """Eval compute dtype."""
    world_size: str | None = None
    """Eval world size(s), `;`-joined when sections ran at different sizes (results do not depend on it)."""
    code_version: str | None = None
    """Eval code version(s): `CodeVersion.label`, `;`-joined when sections came from different runs."""
    train_code_version: str | None = None
    eval_settings_hash: str | None = None
    """Hash over every section's settings hash (equal across tags iff every section was set up alike)."""
    eval_data_hash: str | None = None
    """Hash over every section's data hash."""

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if value == "" else value


PROVENANCE_COLUMNS: tuple[str, ...] = tuple(
    n for n in ResultsRow.model_fields if n not in ("experiment", "tag", "variant")
)


def provenance(doc: EvalDoc) -> dict[str, Any]:
    """The provenance columns of results.csv from one eval.json: the checkpoint's facts that are columns (same
    names), then what the sections' runs record."""
    runs = [doc.measured[k] for k in sorted(doc.measured)]
    return doc.checkpoint.model_dump(include=set(PROVENANCE_COLUMNS)) | {
        "train_seq_len": doc.train_seq_len,
        "dtype": ";".join(sorted({r.dtype for r in runs})) or None,
        "world_size": ";".join(str(w) for w in sorted({r.world_size for r in runs})) or None,
        "code_version": ";".join(sorted({r.code_version.label for r in runs})) or None,
        "eval_settings_hash": short_hash({k: doc.measured[k].settings_hash for k in sorted(doc.measured)}),
        "eval_data_hash": short_hash({k: doc.measured[k].data_hash for k in sorted(doc.measured)}),
    }
