"""rlab's command classes for Typer's `cls=` hook: help whose type column has no `<bool>` on switches.

Switches (`--help`, `--json`, `--quiet`, completion) take no value, so their type column stays empty,
which keeps the help column wide at 80 columns. Ranges are checked by `options.at_least` callbacks and
named in the help text, not shown as `<int range> [x>=1]`.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup


def _quiet_switches(params: list[Any]) -> list[Any]:
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class RlabCommand(TyperCommand):
    """A Typer command whose switches show no type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _quiet_switches(super().get_params(ctx))


class RlabGroup(TyperGroup):
    """A Typer group whose switches show no type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _quiet_switches(super().get_params(ctx))
