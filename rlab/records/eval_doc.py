"""eval.json: everything measured on one checkpoint of one tag, a section per eval that ran.

`metrics` has one optional field per eval of the catalog, each validated by that eval's section model
(`EvalDefinition.section`); the model is built from the catalog when this module is imported, so a new eval's
section needs nothing here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from pydantic import ConfigDict, Field, ValidationError, create_model

from rlab.atomic_io import write_text_atomic
from rlab.evals import catalog
from rlab.evals.definition import resolve
from rlab.records.base import ContractError, Record, first_error
from rlab.records.provenance import CheckpointFacts, SectionRun
from rlab.records.sections import Section

EVAL_SCHEMA: Final = "rlab.eval/2"

S = TypeVar("S", bound=Section)


class WindowsAt(Record):
    """The attention windows of one input length (`rlab.core.architecture.eval_window_sizes`)."""

    length: int
    windows: list[int] | None
    """Per layer, how far back a query attends; null = the model has no windowed layers."""
    capped_at: int | None
    """The farthest back any layer attends when that is less than the input needs (length - 1): the model
    cannot use the whole window (the report marks such lengths); null = some layer sees the whole input."""


class AttentionRecord(Record):
    """How attention windows were sized in this evaluation, at every length its evals used."""

    rule: Literal["extend", "scale", "capped"]
    """`eval.attention_windows` (it matters only for windowed models past their sequence_len)."""
    windowed: bool
    """The model has sliding-window layers (nanochat-2026 `window_pattern`)."""
    sequence_len: int
    lengths: list[WindowsAt]


class Sections(Record):
    """What every `metrics` of eval.json offers: its sections in the catalog's order, typed on request."""

    def present(self) -> list[str]:
        """Names of the sections it has (the evals that ran), in the catalog's order."""
        return [name for name in type(self).model_fields if getattr(self, name) is not None]

    def get(self, name: str) -> Section | None:
        """Section `name`, or None when that eval did not run."""
        return getattr(self, name, None)

    def of(self, model: type[S]) -> S | None:
        """The section whose model is `model` (typed), or None when that eval did not run."""
        return next((s for s in map(self.get, self.present()) if isinstance(s, model)), None)


def section_model(name: str) -> type[Section]:
    """The section model the catalog's eval `name` declares."""
    model = resolve(catalog.get(name).section)
    if not (isinstance(model, type) and issubclass(model, Section)):
        raise TypeError(
            f"eval {name}: its section {catalog.get(name).section} is not a rlab.records.sections.Section"
        )
    return model


def _metrics_model() -> type[Sections]:
    fields: dict[str, Any] = {name: (section_model(name) | None, None) for name in catalog.names()}
    return create_model("EvalMetrics", __base__=Sections, __doc__=Sections.__doc__, **fields)


if TYPE_CHECKING:
    EvalMetrics = Sections
else:
    EvalMetrics = _metrics_model()
    """One optional section per eval of the catalog (absent = not run), in the catalog's order."""


class EvalDoc(Record):
    """eval.json: everything measured on one checkpoint of one tag."""

    schema_: Literal["rlab.eval/2"] = Field(EVAL_SCHEMA, alias="schema")
    experiment: str
    tag: str
    variant: str
    rope: dict[str, Any]
    rope_eval: dict[str, Any] | None = None
    """How the RoPE frequencies were chosen during this evaluation (`rlab.evals.rope_eval`; dynamic-ntk's rule)."""
    attention: AttentionRecord | None = None
    """How attention windows were sized at each eval length (`rlab.evals.windows`); absent in older files."""
    train_seq_len: int
    checkpoint: CheckpointFacts
    metrics: EvalMetrics
    measured: dict[str, SectionRun]
    """How each section of `metrics` was measured (same keys)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_attribute_docstrings=True)

    @property
    def step(self) -> int:
        return self.checkpoint.step

    def section(self, name: str) -> Section | None:
        """Section `name` of `metrics`, or None when that eval did not run."""
        return self.metrics.get(name)


def _json_safe(value: Any) -> Any:
    """NaN/inf are not JSON: null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def write_eval_doc(path: Path, doc: EvalDoc) -> None:
    """eval.json, atomically (non-finite numbers become null)."""

    data = doc.model_dump(mode="json", by_alias=True)
    data["metrics"] = {k: v for k, v in data["metrics"].items() if v is not None}  # absent = not run
    data = _json_safe(data)
    write_text_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def read_eval_doc(path: Path) -> EvalDoc:
    """eval.json through its model; a ContractError naming the file when it does not match."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ContractError(f"No eval.json at {path}.", "Run `rlab eval --tag TAG` first.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ContractError(
            f"{path} is not readable JSON ({type(exc).__name__}).", "Re-run `rlab eval` for this tag."
        ) from None
    if isinstance(data, dict) and data.get("schema") != EVAL_SCHEMA:
        raise ContractError(
            f"{path} has schema {data.get('schema')!r}, this rlab reads {EVAL_SCHEMA!r}.",
            "Re-run `rlab eval` for this tag with this version of rlab.",
        )
    try:
        return EvalDoc.model_validate(data)
    except ValidationError as exc:
        raise ContractError(
            f"{path} does not match the eval.json contract: {first_error(exc)}.",
            "Re-run `rlab eval` for this tag.",
        ) from None
