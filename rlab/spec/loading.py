"""Read an experiment spec from YAML, apply command-line overrides, fill in defaults.

This is the only code that reads YAML. Validation happens once, here: every problem of a
spec is reported together, one line each, with its dotted YAML path
(``experiments/x.yaml: train.steps: must be > 0 (got -5)``), as a `SpecError`.

Flags win over the file: `load_spec(path, steps=10)` validates the file's content with
``train.steps = 10`` written over it, so a bad flag is reported with the same paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from rlab.errors import SpecError, unknown_name_error
from rlab.evals import catalog
from rlab.paths import (
    RESOLVED_SPEC_NAME,
    default_base_dir,
    default_results_root,
    env_base_dir,
    env_results_root,
    recorded_results_root,
)
from rlab.spec.bounds import shown
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.rope import NEEDS_PARAMETERS, VARIANT_NAMES

# Named overrides (CLI flags) -> dotted path in the spec.
OVERRIDE_PATHS: dict[str, str] = {
    "name": "name",
    "results_dir": "results_dir",
    "base_dir": "base.base_dir",
    "base_tag": "base.tag",
    "from_step": "base.step",
    "steps": "train.steps",
    "seeds": "train.seeds",
    "zero_shot": "train.zero_shot",
    "replicate_base": "train.replicate_base",
    "pretrain_steps": "pretrain.train.steps",
    "pretrain_seeds": "pretrain.train.seeds",
    "seq_len": "train.seq_len",
    "target_len": "target_len",
    "nproc": "launch.nproc_per_node",
    "nnodes": "launch.nnodes",
    "node_rank": "launch.node_rank",
    "rdzv_endpoint": "launch.rdzv_endpoint",
    "gpus_per_variant": "launch.gpus_per_variant",
    "max_restarts": "launch.max_restarts",
    "launcher": "launch.launcher",
    "lengths": "eval.lengths",
    "max_per_task": "eval.max_per_task",
    "tasks": "eval.core_tasks",
    "eval_bundle": "eval.core_bundle",
}

MAX_PROBLEM_LINES = 12
"""Problems listed one per line; the rest are counted (a list of 5000 bad entries is not 5000 lines)."""
_SCHEMA_HINT = "Run `rlab validate SPEC` to check a file, `rlab schema` for every key."


def load_spec(path: Path | str | None = None, *, resolve: bool = True, **overrides: Any) -> ExperimentSpec:
    """Load `path` (or the defaults when None), apply overrides (None = not given), validate.

    `variants` (a list of names, or a comma-separated string) selects which variants run:
    names the spec defines keep their config, built-in names get the default config at
    the spec's `scale`. `eval_switches` (eval name -> on, off or None) adds evals to
    `eval.evals` or drops them (`rlab eval --core/--no-core`). With `resolve`, base_dir and results_dir are filled in from the
    environment (see `rlab.paths`), so the returned spec is complete and can be saved.
    """
    source = str(path) if path is not None else "<flags>"
    raw = _read_yaml(Path(path)) if path is not None else {}
    if path is not None and Path(path).name == RESOLVED_SPEC_NAME:
        _reroot_recorded(raw, Path(path))
    variants = overrides.pop("variants", None)
    _switch_evals(raw, overrides.pop("eval_switches", None) or {})
    for key, value in overrides.items():
        if key not in OVERRIDE_PATHS:
            raise TypeError(f"load_spec: unknown override {key!r}")
        if value is not None:
            value = value.value if isinstance(value, Enum) else value  # a CLI choice (e.g. Launcher.slurm)
            _set_dotted(raw, OVERRIDE_PATHS[key], str(value) if isinstance(value, Path) else value)
    spec = _validate(raw, source)
    if variants is not None:
        spec = _validate(_select_variants(spec, variants, source), source)
    return resolve_defaults(spec) if resolve else spec


def _reroot_recorded(raw: dict[str, Any], path: Path) -> None:
    """A spec rlab wrote records absolute paths; the environment beats them, and its results root is
    where the file lies now (a moved or copied results folder works in place). Flags still win."""
    base = raw.get("base")
    env_base = env_base_dir()
    if env_base is not None and isinstance(base, dict):
        base["base_dir"] = str(env_base)
    experiment = raw.get("name") or (base.get("tag") if isinstance(base, dict) else None)
    results = env_results_root() or (
        recorded_results_root(path, experiment) if isinstance(experiment, str) else None
    )
    if results is not None:
        raw["results_dir"] = str(results)


def resolve_defaults(spec: ExperimentSpec) -> ExperimentSpec:
    """Fill base_dir, results_dir and name from the environment and the base tag.

    Every path comes out absolute (a relative one is taken from the working directory now), so the
    resolved spec rlab saves, and every command it prints, work from any directory.
    """
    base = spec.base
    base_dir = default_base_dir() if base.base_dir is None else Path(base.base_dir)
    base = base.model_copy(update={"base_dir": _absolute(base_dir)})
    update: dict[str, Any] = {"base": base, "name": spec.experiment}
    results_dir = spec.results_dir if spec.results_dir is not None else default_results_root()
    update["results_dir"] = _absolute(results_dir)
    paths = {key: _absolute(value) for key, value in spec.eval if isinstance(value, Path)}  # eval.core_bundle
    if paths:
        update["eval"] = spec.eval.model_copy(update=paths)
    return spec.model_copy(update=update)


def _absolute(path: Path) -> Path:
    return Path(path).expanduser().absolute()


def parse_names(value: str | Sequence[str]) -> list[str]:
    """``"pi, ntk,yarn"`` -> ``["pi", "ntk", "yarn"]`` (order kept, duplicates dropped)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names: list[str] = []
    for item in items:
        item = item.strip()
        if item and item not in names:
            names.append(item)
    return names


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One line per problem: ``<source>: <dotted.path>: <message>``."""
    lines = [f"{source}: {len(exc.errors())} problem(s) in the spec:"]
    for error in exc.errors():
        lines.append(f"  {_error_line(error)}")
    return "\n".join(lines)


def spec_yaml(spec: ExperimentSpec) -> str:
    """The spec as YAML (what `ExperimentLayout.resolved_spec` holds)."""

    data = spec.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


class _DuplicateKey(ValueError):
    """A key written twice in one YAML mapping (PyYAML would keep the last silently)."""


def _unique_keys_loader() -> type:
    """yaml's SafeLoader refusing a key that occurs twice in a mapping (line numbers in the message)."""

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (str, int, float, bool)):  # a YAML key may be a list or mapping too
                    if key in seen:
                        raise _DuplicateKey(
                            f"key {key!r} appears twice (line {key_node.start_mark.line + 1})"
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _read_yaml(path: Path) -> dict[str, Any]:

    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SpecError(
            f"Spec file not found: {path}", "Check the spec path (a YAML file, e.g. experiments/demo.yaml)."
        ) from None
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start : exc.start + 1]!r}).",
            "A spec is a YAML text file; save it as UTF-8.",
        ) from None
    except OSError as exc:
        raise SpecError(
            f"Cannot read spec {path}: {exc.strerror or exc}.",
            "Check the spec path (a YAML file, e.g. experiments/demo.yaml).",
        ) from None
    try:
        data = yaml.load(text, Loader=_unique_keys_loader())  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise SpecError(f"{path}: {exc}.", "Each key may appear once in a mapping; remove one.") from None
    except RecursionError:
        raise SpecError(f"{path}: nested too deeply to be a spec.", _SCHEMA_HINT) from None
    except ValueError as exc:  # an integer past Python's 4300-digit limit for reading numbers
        reason = "a number of more than 4,300 digits" if "digits" in str(exc) else shown(str(exc), 80)
        raise SpecError(f"{path}: a value that cannot be read: {reason}.", _SCHEMA_HINT) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{path}: not valid YAML{where}: {problem}") from None
    if data is None:
        raise SpecError(
            f"{path}: the spec is empty.", "A spec names at least its base, e.g. `base: {tag: d20}`."
        )
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a spec must be a mapping of keys (got {type(data).__name__}).")
    return data


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = raw
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[leaf] = value


def _switch_evals(raw: dict[str, Any], switches: dict[str, bool | None]) -> None:
    """`eval.evals` (the spec's, else the default list) with the evals switched on added, those switched off
    dropped; a value that is not a list is left for validation to report."""
    if not any(on is not None for on in switches.values()):
        return
    if raw.get("eval") is None:
        raw["eval"] = {}
    section = raw["eval"]
    evals = section.get("evals", list(catalog.default_names())) if isinstance(section, dict) else None
    if not isinstance(evals, list):
        return
    evals = [name for name in evals if switches.get(name) is not False]
    evals += [name for name in catalog.names() if switches.get(name) and name not in evals]
    if not evals:
        flags = [f"--{d.flag}" for d in catalog.definitions()]
        raise SpecError("No evals left to run.", f"Enable one with {', '.join(flags[:-1])} or {flags[-1]}.")
    section["evals"] = evals


def _validate(raw: dict[str, Any], source: str) -> ExperimentSpec:
    raw, early = _check_variant_names(raw)
    lines: list[str] = list(early)
    try:
        spec = ExperimentSpec.model_validate(raw)
    except RecursionError:
        raise SpecError(f"{source}: nested too deeply to be a spec.", _SCHEMA_HINT) from None
    except ValidationError as exc:
        lines += [_error_line(error) for error in exc.errors()]
    except SpecError as exc:  # raised by a field validator outside pydantic's error list
        lines.append(exc.message)
    else:
        if not lines:
            return spec
    header = f"{source}: {len(lines)} problem(s) in the spec:"
    shown_lines = [f"  {line}" for line in lines[:MAX_PROBLEM_LINES]]
    if len(lines) > MAX_PROBLEM_LINES:
        shown_lines.append(f"  ... and {len(lines) - MAX_PROBLEM_LINES} more")
    raise SpecError("\n".join([header, *shown_lines]), _SCHEMA_HINT)


def _check_variant_names(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Unknown RoPE variant names as problem lines (with a suggestion), so they are reported with the rest.

    The unknown name is swapped for plain `rope` in a copy, letting pydantic check everything else.
    """
    variants = raw.get("variants")
    if not isinstance(variants, dict):
        return raw, []
    problems: list[str] = []
    fixed: dict[str, Any] = {}
    for name, value in variants.items():
        if (
            isinstance(value, dict)
            and isinstance(value.get("variant"), str)
            and value["variant"].strip().lower() not in VARIANT_NAMES
        ):
            problems.append(
                f"variants.{name}.variant: "
                f"{unknown_name_error('RoPE variant', value['variant'], VARIANT_NAMES).message}"
            )
            value = {**value, "variant": "rope"}
        fixed[name] = value
    return ({**raw, "variants": fixed} if problems else raw), problems


def _select_variants(spec: ExperimentSpec, variants: str | Sequence[str], source: str) -> dict[str, Any]:
    names = parse_names(variants)
    if not names:
        raise SpecError("--variants is empty.", "Give one or more names, e.g. --variants pi,ntk,yarn.")
    builtins = spec.builtin_variants()
    available = {**builtins, **spec.variants}
    selected: dict[str, Any] = {}
    by_lower = {key.lower(): key for key in available}
    for name in names:
        if name not in available and name.lower() in by_lower:
            name = by_lower[name.lower()]  # `--variants YaRN` means yarn
        if name not in available and name.lower() in NEEDS_PARAMETERS:
            raise SpecError(
                f"Variant '{name.lower()}' needs {NEEDS_PARAMETERS[name.lower()]}: it has no built-in default.",
                f"Define it under `variants:` in a spec, e.g. `{name.lower()}: {{variant: {name.lower()}, ...}}`, "
                "and select it by that name.",
            )
        if name not in available:
            raise unknown_name_error("variant", name, available, SpecError)
        selected[name] = available[name].model_dump(mode="json", exclude_unset=True)
    raw = spec.model_dump(mode="json", exclude_unset=True)  # unset fields stay unset (the plan fills them)
    raw["variants"] = selected
    return raw


def _error_line(error: ErrorDetails) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    message = str(error.get("msg", ""))
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    # Our model validators name the field first ("factor: must be ..."); fold it into the path.
    head, sep, rest = message.partition(": ")
    if sep and head.isidentifier() and error.get("type") == "value_error":
        loc.append(head)
        message = rest
    if error.get("type") == "extra_forbidden":
        message = "unknown key (misspelled?)"
    path = ".".join(loc) if loc else "<root>"
    got = error.get("input")
    if error.get("type") not in ("extra_forbidden", "missing", "value_error") and not isinstance(
        got, (dict, list)
    ):
        message = f"{message} (got {shown(got)})"
    return f"{path}: {message}"
