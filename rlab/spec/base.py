"""The base class of every spec model: strict, frozen, documented by attribute docstrings."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PositiveInt

_DISABLED_SPELLINGS = {"never", "off", "disabled", "none", "no"}


class StrictModel(BaseModel):
    """Misspelled keys fail loudly (`extra="forbid"`); specs never change after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _disabled_to_none(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in _DISABLED_SPELLINGS:
        return None
    if isinstance(value, bool) and value is False:
        return None
    return value


Cadence = Annotated[PositiveInt | None, BeforeValidator(_disabled_to_none)]
"""Every N steps; `never` (or null/off) disables it. Zero and negative numbers are errors,
so a sentinel such as -1 can never silently mean "every step" (`step % -1 == 0`)."""
