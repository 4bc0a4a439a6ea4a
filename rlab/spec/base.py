"""The base class of every spec model: strict, frozen, documented by attribute docstrings."""

from __future__ import annotations

import typing
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from rlab.spec.bounds import Every

_DISABLED_SPELLINGS = {"never", "off", "disabled", "none", "no"}


def _disabled_to_none(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in _DISABLED_SPELLINGS:
        return None
    if isinstance(value, bool) and value is False:
        return None
    return value


Cadence = Annotated[Every | None, BeforeValidator(_disabled_to_none)]
"""Every N steps; `never` (or null/off/false) disables it. Zero and negative numbers are errors,
so a sentinel such as -1 can never silently mean "every step" (`step % -1 == 0`)."""


class StrictModel(BaseModel):
    """Misspelled keys fail loudly (`extra="forbid"`); specs never change after validation.

    Numbers are numbers: YAML's `true` is never taken for 1 (pydantic's lax mode would turn
    `seq_len: true` into 1), and `.nan`/`.inf` are refused wherever a float is expected.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_as_number(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            if field is None or not _holds_bool(value) or _admits_bool(field.annotation):
                continue
            if value is False and any(getattr(m, "func", None) is _disabled_to_none for m in field.metadata):
                continue  # a cadence: false = never
            raise ValueError(f"{name}: expected a number, not a boolean (got {value!r})")
        return data


def _holds_bool(value: Any) -> bool:
    """A bool, or a list/tuple with one (a dict is a sub-model's business: it checks its own fields)."""
    if isinstance(value, bool):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_bool(v) for v in value)


def _admits_bool(annotation: Any) -> bool:
    """Whether a field may hold a bool: it names bool or Any, or no number type at all (str, Path and
    Literal reject a bool themselves; models and dicts validate their own content)."""
    return _mentions(annotation, (bool, Any)) or not _mentions(annotation, (int, float))


def _mentions(annotation: Any, types: tuple[object, ...]) -> bool:
    if any(annotation is t for t in types):
        return True
    return any(_mentions(arg, types) for arg in typing.get_args(annotation))
