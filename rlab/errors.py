"""The one exception family that library code raises for a user's mistake.

Library code never prints and never exits: it raises an `RlabError` carrying a message
(what went wrong, with the offending value) and a hint (what to do next). Only
`rlab.cli.app.main` renders it, without a traceback unless `RLAB_DEBUG=1`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RlabError(Exception):
    """A user-facing error: `message` says what is wrong, `hint` what to do about it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n{self.hint}"


class SpecError(RlabError):
    """An experiment spec or run config is invalid."""


class CheckpointError(RlabError):
    """A checkpoint is missing, incomplete, or does not fit the model."""


class DataError(RlabError):
    """A corpus, shard or tokenizer is missing or malformed."""


class TrainingError(RlabError):
    """Training cannot go on (e.g. too many non-finite steps in a row)."""


class LaunchError(RlabError):
    """A job could not be launched or failed."""


class EvalError(RlabError):
    """An evaluation cannot run (missing bundle, malformed task file, ...)."""


def unknown_name_error(kind: str, name: str, available: Iterable[str], cls: type[RlabError] = RlabError) -> RlabError:
    """`Unknown RoPE variant 'yarm'. Did you mean 'yarn'? Available: ...` as an error object."""
    names = sorted(available)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    did_you_mean = f" Did you mean '{close[0]}'?" if close else ""
    return cls(f"Unknown {kind} '{name}'.{did_you_mean} Available: {', '.join(names)}.")
