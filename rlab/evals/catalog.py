"""Every eval rlab can run, found by looking: each package under `rlab/evals/` that declares `EVAL`.

    catalog.names()          # ('bpb', 'bpb_length', 'core', 'passkey', 'ruler', 'copy_distance')
    catalog.get("core")      # its EvalDefinition; a typo gets "Did you mean 'core'?"

Adding an eval is adding its package (see docs/architecture.md, "How to add an eval"): nothing here or
elsewhere lists the evals by hand. Packages without `EVAL` (`retrieval/`, shared by passkey and ruler) are
not evals. Light on purpose (`rlab.evals.definition`): the CLI and the spec import it.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from rlab.errors import EvalError, unknown_name_error
from rlab.evals.definition import EvalDefinition, Input

_PACKAGE = "rlab.evals"


@functools.cache
def definitions() -> tuple[EvalDefinition, ...]:
    """Every eval's definition, in `order`: the packages on `rlab.evals`' path (its folder; a test may add one)."""
    found = []
    for info in pkgutil.iter_modules(importlib.import_module(_PACKAGE).__path__):
        if info.ispkg:
            definition = getattr(importlib.import_module(f"{_PACKAGE}.{info.name}"), "EVAL", None)
            if isinstance(definition, EvalDefinition):
                found.append(definition)
    names = [d.name for d in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two evals share a name: {sorted(names)}")
    return tuple(sorted(found, key=lambda d: (d.order, d.name)))


def names() -> tuple[str, ...]:
    """Every eval's name, in order."""
    return tuple(d.name for d in definitions())


def default_names() -> tuple[str, ...]:
    """The evals `eval.evals` runs when a spec does not say."""
    return tuple(d.name for d in definitions() if d.default)


def get(name: str) -> EvalDefinition:
    """The definition of `name`, or `Unknown eval 'cor'. Did you mean 'core'? Available: ...`."""
    for definition in definitions():
        if definition.name == name:
            return definition
    raise unknown_name_error("eval", name, names(), EvalError)


def needing(what: Input, selected: tuple[str, ...] | list[str]) -> list[str]:
    """Which of the `selected` evals read `what`."""
    return [d.name for d in definitions() if d.name in selected and what in d.inputs]
