"""The part every estimand's row shares: the arm it describes."""

from __future__ import annotations

from typing import Any, TypeVar

from rlab.records.base import Record
from rlab.report.sources.arms import Arm

R = TypeVar("R", bound="ArmRow")


class ArmRow(Record):
    """What every estimand's row starts with: the arm it describes (`rlab.report.sources.arms.Arm`)."""

    arm: str
    kind: str
    variant: str

    @classmethod
    def of(cls: type[R], arm: Arm, **fields: Any) -> R:
        """A row of `arm` (its key, condition and variant) with the estimand's own `fields`."""
        return cls(arm=arm.key, kind=arm.kind, variant=arm.variant, **fields)
