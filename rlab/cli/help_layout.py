"""rlab's command classes for Typer's `cls=` hook: help whose type column has no `<bool>` on switches.

Switches (`--help`, `--json`, `--quiet`, completion) take no value, so their type column stays empty,
which keeps the help column wide at 80 columns. Ranges are checked by `options.at_least` callbacks and
named in the help text, not shown as `<int range> [x>=1]`.

A switch's value is already a bool (or None when unset), so it is passed through as it is: Typer would build a
pydantic `TypeAdapter` to coerce it on first use, and the root group's unset `--help` and completion switches
are processed before every subcommand, which imported pydantic into `rlab CMD --help` (a third of its time).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

try:  # Typer's pydantic coercion (0.2x); an older Typer has nothing to pass through
    from typer._coercion import PassThroughRuntimeParam
except ImportError:  # pragma: no cover - depends on the installed Typer
    PassThroughRuntimeParam = None  # type: ignore[assignment,misc]


def _quiet_switches(params: list[Any]) -> list[Any]:
    for param in params:
        if not getattr(param, "is_flag", False):
            continue
        if param.metavar is None:
            param.metavar = ""
        descriptor = getattr(param, "type_descriptor", None)
        unset = getattr(param, "_runtime_param", True) is None  # built on first use
        if (
            PassThroughRuntimeParam is not None
            and unset
            and descriptor is not None
            and descriptor.annotation is bool
        ):
            param._runtime_param = PassThroughRuntimeParam(descriptor.parameter_info, bool)
    return params


class RlabCommand(TyperCommand):
    """A Typer command whose switches show no type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _quiet_switches(super().get_params(ctx))


class RlabGroup(TyperGroup):
    """A Typer group whose switches show no type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _quiet_switches(super().get_params(ctx))
