"""What every file contract shares: the strict base model, the error a file that breaks its contract raises,
and the content hash that identifies what was measured."""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from rlab.errors import RlabError


class ContractError(RlabError):
    """A file does not match its contract (written by an older rlab, truncated, or edited by hand)."""


class Record(BaseModel):
    """Every contract model: unknown keys are errors (a misspelled field never passes silently)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    columns: ClassVar[tuple[str, ...]] = ()
    """A CSV row model's columns, in file order (empty for models that are not CSV rows)."""


def short_hash(data: Any) -> str:
    """sha256 (12 hex) of canonical JSON (sorted keys) or of bytes."""
    raw = data if isinstance(data, bytes) else json.dumps(data, sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:12]


def first_error(exc: ValidationError) -> str:
    """The first problem of a validation error as `where: what (and N more)`, for a one-line ContractError."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" + (
        f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    )
