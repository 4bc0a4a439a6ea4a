"""What an eval is, declared once: the rest of rlab derives its view of an eval from this.

Each eval is a package under `rlab/evals/` whose `__init__.py` holds `EVAL = package_eval(__name__, ...)`;
`rlab.evals.catalog` finds them. From a definition come the spec's `eval.evals` names and default
(`rlab.spec.eval`), the `--<name>/--no-<name>` switches of `rlab eval`, its section of eval.json
(`rlab.records.eval_doc.EvalMetrics`), the files its section owns (`rlab.evals.outputs`), its keys of the
spec's `eval:` section (`rlab.spec.eval.EvalSpec`, from its settings model) and those hashed into its
provenance, what must exist before the workers start (`rlab.orchestrate.evaluation`), its own checks before a
launch (`preflight`, called by `rlab.orchestrate.eval_plan`), and the side files the report reads
(`rlab.report.sources.tag_files`).

Plain Python on purpose (no pydantic, no torch): `rlab --help` lists the switches without importing
either. The section model, settings model, row models and run function are named as "module:attribute" and
imported only where they are used (`resolve`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rlab.evals.settings import EvalSettings

Input = Literal["long_docs", "core_bundle"]
"""What an eval reads besides the checkpoint: the base dir's long-document set (`rlab.data.long_docs`,
built before the workers start when missing) or the CORE bundle (`rlab.evals.core.bundle`)."""

LENGTH_SETTINGS = ("lengths", "target_len", "extra_lengths")
"""The settings of the length grid (`rlab.evals.lengths`), for the evals that measure along it."""
ROPE_EVAL_SETTINGS = ("dynamic_ntk", "dynamic_ntk_len")
"""How a dynamic-ntk model's frequencies are chosen at eval time (`rlab.evals.rope_eval`), for the evals that
measure past the training length."""


@dataclass(frozen=True)
class OutputFile:
    """A CSV an eval writes into `evals/<tag>/`, written and read through its row model."""

    name: str
    """File name, e.g. `passkey_trials.csv`."""
    row: str
    """Its row model, "module:Class" (a `rlab.records.base.Record` with `columns`)."""
    report: bool = False
    """The report reads it (`TagSources.tables[key]`)."""

    @property
    def key(self) -> str:
        """The file's name without `.csv`: how the report refers to it."""
        return self.name.removesuffix(".csv")


@dataclass(frozen=True)
class EvalDefinition:
    """One eval: its name, switch, outputs and settings."""

    name: str
    """Its `eval.evals` entry, its eval.json section and its switch (`--bpb-length/--no-bpb-length`)."""
    order: int
    """Where it runs and is listed among the evals (lower first)."""
    help: str
    """One sentence: the switch's help and its entry in the spec's list of evals."""
    section: str
    """Its eval.json section model, "module:Class" (a `rlab.records.sections.Section`)."""
    run: str
    """Its run function, "module:function": (`rlab.evals.context.EvalContext`) -> `EvalOutcome`."""
    settings_model: str | None = None
    """Its own settings, "module:Class" (an `rlab.evals.settings.EvalSettings` in its package's `settings.py`):
    their fields are keys of the spec's `eval:` section (`rlab.spec.eval.EvalSpec` is derived from them)."""
    shared_settings: tuple[str, ...] = ()
    """The shared `EvalSpec` settings its numbers also depend on (`LENGTH_SETTINGS`, "seed", ...)."""
    default: bool = True
    """Runs when `eval.evals` is not given."""
    files: tuple[OutputFile, ...] = ()
    """The CSVs its section owns in `evals/<tag>/` (removed with the section; bpb_units.csv is shared)."""
    variant_csv: str | None = None
    """Row model ("module:Class") of the experiment's `results_<variant>.csv` when it writes one (CORE per task)."""
    inputs: frozenset[Input] = frozenset()
    """What it reads besides the checkpoint."""
    windowed: bool = False
    """It evaluates past the model's sequence_len, so `eval.attention_windows` changes what it measures (the
    runner adds the rule to its settings for a windowed model)."""
    preflight: str | None = None
    """Its checks before `rlab eval` starts a worker, "module:function": (`EvalSpec`, `rlab.paths.BaseLayout`) ->
    `RlabError | None`. It raises what makes any plan wrong (a task that does not exist) and returns what only
    stops a run (a missing input: a dry run says it, a run refuses)."""

    @property
    def flag(self) -> str:
        """The switch's name: `--<flag>` / `--no-<flag>`."""
        return self.name.replace("_", "-")

    @property
    def settings(self) -> tuple[str, ...]:
        """The `EvalSpec` fields its numbers depend on, its own (`settings_model`, less its `not_hashed`) then
        the shared ones: recorded and hashed with its section, so two tags whose sections differ in one of them
        are not compared (`rlab.report.sources.comparability`). Imports the settings model (pydantic)."""
        model = self.settings_type()
        return (*(model.hashed() if model else ()), *self.shared_settings)

    def settings_type(self) -> type[EvalSettings] | None:
        """Its settings model (imported here, with pydantic), or None when it has no settings of its own."""
        return resolve(self.settings_model) if self.settings_model else None

    def settings_of(self, settings: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The settings this eval depends on (from the whole `eval` section as JSON), plus the facts of one run
        that change what it measures (`extra`, e.g. the lengths it used)."""
        return {**{k: settings.get(k) for k in self.settings}, **(extra or {})}


def package_eval(
    package: str,
    *,
    order: int,
    help: str,
    files: tuple[OutputFile, ...] = (),
    variant_csv: str | None = None,
    settings: bool = True,
    preflight: bool = False,
    **options: Any,
) -> EvalDefinition:
    """The definition of the eval in `package`, laid out as every eval is: `run.py` holds `run`, `records.py`
    `<Name>Metric` and `settings.py` `<Name>Settings` (`<Name>`: the package's name in CamelCase; `settings=False`:
    it has no settings of its own); `preflight=True`: `preflight.py` holds `preflight`.

    A row model named from "." (`.records:PasskeyTrial`) is the package's own; `options` are the other fields.
    """
    name, stem = package_names(package)

    def own(ref: str) -> str:
        return package + ref if ref.startswith(".") else ref

    return EvalDefinition(
        name=name,
        order=order,
        help=help,
        section=f"{package}.records:{stem}Metric",
        run=f"{package}.run:run",
        settings_model=f"{package}.settings:{stem}Settings" if settings else None,
        files=tuple(replace(f, row=own(f.row)) for f in files),
        variant_csv=own(variant_csv) if variant_csv else None,
        preflight=f"{package}.preflight:preflight" if preflight else None,
        **options,
    )


def package_names(package: str) -> tuple[str, str]:
    """An eval package's name (`bpb_length`) and the stem of its class names (`BpbLength`)."""
    name = package.rpartition(".")[2]
    return name, name.title().replace("_", "")


def resolve(ref: str) -> Any:
    """The attribute a "module:attribute" reference names (imported on first use)."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)
