"""The base of an eval's own settings: the `eval.<key>`s only that eval reads, declared in its package.

Each eval with settings of its own has `rlab/evals/<name>/settings.py` holding one `EvalSettings` subclass (its
fields, defaults, docstrings and validators), named by its definition's `settings_model`. The spec's
`EvalSpec` (`rlab.spec.eval`) is derived from them: the shared settings plus every eval's, flat, so a
spec still says `eval.passkey_trials`. An eval reads its own through its model, typed:

    PasskeySettings.of(ctx.spec).passkey_trials
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from pydantic import BaseModel

from rlab.spec.base import StrictModel

Settings = TypeVar("Settings", bound="EvalSettings")


class EvalSettings(StrictModel):
    """One eval's own settings (every field an `eval.<key>` of the spec)."""

    not_hashed: ClassVar[tuple[str, ...]] = ()
    """Fields left out of the settings hashed with the eval's section (`EvalDefinition.settings`): the run
    records what they resolved to instead (`EvalOutcome.settings_extra`)."""

    @classmethod
    def of(cls: type[Settings], spec: BaseModel) -> Settings:
        """This eval's settings as `spec` (the experiment's `EvalSpec`, which holds every eval's) gives them."""
        return cls.model_validate({name: getattr(spec, name) for name in cls.model_fields})

    @classmethod
    def hashed(cls) -> tuple[str, ...]:
        """Its fields that go into its section's settings hash, in declaration order."""
        return tuple(name for name in cls.model_fields if name not in cls.not_hashed)

    def own_lengths(self) -> tuple[int, ...] | None:
        """The input lengths it evaluates at when it has its own list (else the eval grid or none): the
        attention record of eval.json covers them (`rlab.evals.windows.lengths_in_use`)."""
        return None
