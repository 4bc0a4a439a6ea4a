"""What an experiment spec's evals can detect: the power line of `rlab continue --dry-run`.

From the spec alone: the units each endpoint class will have (BPB-vs-length documents from `eval.length_tokens`,
`eval.length_block` and the base dir's long-document set; CORE examples from `eval.max_per_task`; passkey keys;
copy records per distance), the seeds per arm (`train.seeds`) and how many comparisons each family will hold
(`planned_families`: the report's own rules). The noise comes from a pilot when the experiment already has evals (its own per-unit files, through
`pilot.noise_from_report`), else from `DEFAULT_NOISE` (stated, with its source). Each class is then checked
against `eval.target_mde` (`power.plan_endpoint`): the MDE at the planned size, and what would reach the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.data.long_docs import read_long_docs_manifest
from rlab.errors import RlabError
from rlab.evals.bpb_length.settings import BpbLengthSettings
from rlab.evals.copy_distance.settings import CopyDistanceSettings
from rlab.evals.core.settings import CoreSettings
from rlab.evals.lengths import eval_lengths, experiment_target_len
from rlab.evals.passkey.settings import PasskeySettings
from rlab.paths import ExperimentLayout, default_results_root
from rlab.report.estimands.effective_length import keys_note
from rlab.report.power import pilot as pilot_noise
from rlab.report.power import planner as power
from rlab.report.stats import inference as inf

if TYPE_CHECKING:
    import pandas as pd

    from rlab.spec.experiment import ExperimentSpec

DEMO_SOURCE = "default: rlab's demo (results/demo, a 2.9M-parameter model, 1 seed), median comparison"
DEFAULT_NOISE: dict[str, tuple[float, str]] = {
    "primary": (0.022, f"{DEMO_SOURCE}; extension BPB (2x minus 1x the training length) per document"),
    "bpb": (0.048, f"{DEMO_SOURCE}; BPB per document of 64 targets, its noisiest length"),
    "core": (0.42, f"{DEMO_SOURCE}; centered accuracy per example"),
    "passkey": (0.71, "default: assumed, two arms disagree on half the keys (a 0/1 outcome per key)"),
    "copy_gain": (0.37, f"{DEMO_SOURCE}; gain in nats/token per record, its noisiest distance"),
}
"""Unit SD per endpoint class when there is no pilot: the median comparison of the committed demo, per class its
noisiest endpoint (`rlab power -e demo` prints them; refresh after regenerating the demo), or an assumption where
the demo has no variation. A real model's noise differs: run a pilot, or state it (`rlab power --unit-sd`)."""
DEFAULT_SEED_SD: dict[str, tuple[float, str]] = {
    "core": (power.NANOCHAT_CORE_SEED_SD, power.NANOCHAT_CORE_SOURCE),
}
"""Run-to-run SD of one arm per endpoint class where one is published (x√2 for a difference of two arms)."""
CLASS_UNITS = {
    "primary": "documents",
    "bpb": "documents",
    "core": "examples",
    "passkey": "keys",
    "copy_gain": "records",
}
SETTINGS = {
    "primary": "eval.length_tokens",
    "bpb": "eval.length_tokens",
    "core": "eval.max_per_task",
    "passkey": "eval.passkey_trials",
    "copy_gain": "eval.copy_trials",
}
"""The spec setting that sets each class's units."""
CORE_TASKS = 22
"""Tasks of DCLM CORE (nanochat's core.yaml), for the examples `eval.max_per_task` gives with no bundle at hand."""


@dataclass(frozen=True)
class Planned:
    """The units one endpoint class will have under a spec, and how they follow from its settings."""

    cls: str
    units: int | None
    per_setting: float
    """Units per unit of the class's setting (documents per length token, examples per max_per_task, ...)."""
    note: str = ""


@dataclass
class PowerCheck:
    """The power of a planned experiment, per endpoint class."""

    plans: list[power.EndpointPlan]
    pilot: str | None
    """The pilot the noise came from (None: defaults / stated)."""
    planned: dict[str, Planned] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Other shortfalls of the plan (too few keys per length for the effective length's interval)."""

    def line(self) -> str:
        """One line: each class's MDE at the planned size vs its target."""
        parts = []
        for p in self.plans:
            cls = power.endpoint_class(p.noise.endpoint, p.noise.family)
            if math.isnan(p.mde_now):
                parts.append(f"{cls} -")
                continue
            mark = " (underpowered)" if p.underpowered else ""
            parts.append(
                f"{cls} {_num(p.mde_now)} vs {_num(p.target)} at {p.noise.n_units} {p.noise.unit}{mark}"
            )
        seeds = self.plans[0].noise.n_seeds if self.plans else 1
        where = f"pilot {self.pilot}" if self.pilot else "default noise (no pilot)"
        return (
            f"power: MDE at 80% power, family alpha/m, {seeds} seed{'s' if seeds != 1 else ''}, noise from "
            f"{where}: " + "; ".join(parts)
        )

    def warnings(self) -> list[str]:
        """One per underpowered class: what it can detect, what the target needs, where the noise came from."""
        out = []
        for p in self.plans:
            if not p.underpowered:
                continue
            n, cls = p.noise, power.endpoint_class(p.noise.endpoint, p.noise.family)
            need = p.one_seed.units if p.one_seed else None
            planned = self.planned.get(cls)
            setting = ""
            if need is not None and planned is not None and planned.per_setting > 0:
                value = math.ceil(need / planned.per_setting)
                setting = f" ({SETTINGS[cls]}: {value:,})"
            reach = (
                f"needs >= {need:,} {n.unit}{setting} at 1 seed"
                if need is not None
                else "out of reach at any number of units"
            )
            out.append(
                f"underpowered for eval.target_mde.{cls} = {_num(p.target)}: {cls} can detect {_num(p.mde_now)} with "
                f"{n.n_units} {n.unit}{f' ({planned.note})' if planned and planned.note else ''} (80% power at "
                f"alpha {p.alpha:.2g} = 0.05/{n.family_size}); {reach}. Noise: {n.source}. See `rlab power`."
            )
        return out + self.notes

    def as_dict(self) -> dict[str, Any]:
        return {
            "pilot": self.pilot,
            "line": self.line(),
            "endpoints": [p.as_dict() for p in self.plans],
            "warnings": self.warnings(),
        }


def _num(x: float) -> str:
    return f"{x:.3g}"


def planned_lengths(spec: ExperimentSpec, l0: int | None) -> list[int]:
    """The eval length grid the spec's evals will use (`rlab.evals.lengths`); without the base's L0, a quarter
    of the target length stands in for it."""

    target = experiment_target_len(spec)
    return eval_lengths(spec.eval, l0 or max(1, target // 4), target)


def planned_units(spec: ExperimentSpec, l0: int | None) -> dict[str, Planned]:
    """Units per endpoint class under the spec's eval settings (classes whose eval is off are absent)."""

    ev = spec.eval
    out: dict[str, Planned] = {}
    lengths = planned_lengths(spec, l0)
    if "bpb_length" in ev.evals and lengths:
        by_length = BpbLengthSettings.of(ev)
        block = by_length.length_block or max(1, min(lengths) // 2)
        blocks = math.ceil(by_length.length_tokens / block)
        docs = _long_docs(spec.base.base_dir, max(lengths) + 1) if spec.base.base_dir else None
        units: int | None = blocks if docs is None else min(blocks, docs)
        note = (
            f"{blocks} blocks of {block} targets, taken as one document each: no long-document set in "
            f"{spec.base.base_dir} to count them"
            if docs is None
            else f"{blocks} blocks of {block} targets over {units} of the {docs} long documents"
        )
        for cls in ("primary", "bpb"):
            out[cls] = Planned(cls, units, 1.0 / block, note)
    if "core" in ev.evals:
        core = CoreSettings.of(ev)
        picked = core.core_tasks
        tasks = len(picked) if picked and not any(_glob(t) for t in picked) else CORE_TASKS
        units = tasks * core.max_per_task if core.max_per_task else None
        out["core"] = Planned(
            "core", units, float(tasks), f"{tasks} tasks x max_per_task {core.max_per_task}"
        )
    if "passkey" in ev.evals:
        passkey = PasskeySettings.of(ev)
        cells = len(passkey.passkey_lengths or lengths) * len(passkey.passkey_depths)
        out["passkey"] = Planned(
            "passkey", cells * passkey.passkey_trials, float(cells), f"{cells} cells x trials"
        )
    if "copy_distance" in ev.evals:
        trials = CopyDistanceSettings.of(ev).copy_trials
        out["copy_gain"] = Planned("copy_gain", trials, 1.0, "records per distance")
    return out


def _glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _long_docs(base_dir: Path, tokens: int) -> int | None:
    """Documents of the base dir's long-document set with at least `tokens` tokens; None with no set."""

    try:
        manifest = read_long_docs_manifest(base_dir)
    except RlabError:
        return None
    return None if manifest is None else manifest.docs_at_least(tokens)


def family_sizes(
    spec: ExperimentSpec,
    planned: dict[str, Planned],
    l0: int | None = None,
    pilot: pd.DataFrame | None = None,
) -> dict[str, int]:
    """How many comparisons each family will hold. Primary and secondary: the comparisons the report will make
    and test (`planned_families`, with the pilot's comparisons where the experiment has evals). The copy
    family: every variant but the baseline (continued, and zero-shot when the spec makes those arms) at each
    window, and a retention comparison per window past `l0` (when some window is within it to retain from);
    an estimate from above only makes the planned MDEs conservative, one from below would not."""
    from rlab.report.power import planned_families  # noqa: PLC0415 - defers matplotlib, torch

    ev = spec.eval
    lengths = planned_lengths(spec, l0)
    units = {cls: p.units for cls, p in planned.items()}
    tables = planned_families.family_sizes(spec, lengths, units, pilot)
    others = max(1, len(spec.variants) - 1) if spec.variants else 1
    arms = others * (2 if spec.train.zero_shot else 1)
    windows = list(CopyDistanceSettings.of(ev).copy_lengths or ev.lengths or ())
    beyond = [w for w in windows if l0 is not None and w > l0]
    retention = len(beyond) if l0 is not None and any(w <= l0 for w in windows) else 0
    return {
        **{family: max(1, size) for family, size in tables.items()},
        "copy": max(1, arms * ((len(windows) or 5) + retention)),
    }


def class_noise(noises: list[power.Noise]) -> dict[str, power.Noise]:
    """A pilot's noise per endpoint class: the noisiest endpoint of each (primary: the primary family's)."""
    out: dict[str, power.Noise] = {}
    for n in noises:
        if n.unit_sd is None:
            continue
        cls = power.endpoint_class(n.endpoint, n.family)
        if cls == "bpb" and n.endpoint in ("train_bpb", "val_bpb"):
            continue  # whole-split BPB: its units are the split's documents, not the long documents
        if cls not in out or (n.unit_sd > (out[cls].unit_sd or 0.0)):
            out[cls] = n
    return out


def check_spec(spec: ExperimentSpec, l0: int | None, pilot: pilot_noise.Pilot | None = None) -> PowerCheck:
    """The power of `spec`'s planned evals for its `eval.target_mde`, noise (and the comparisons its families
    leave out) from `pilot`, else the defaults."""
    planned = planned_units(spec, l0)
    sizes = family_sizes(spec, planned, l0, pilot.comparisons if pilot else None)
    from_pilot = class_noise(pilot.noises) if pilot else {}
    plans = []
    for cls, p in planned.items():
        if p.units is None:
            continue
        family = power.class_family(cls)
        base = from_pilot.get(cls)
        if base is not None:
            noise = replace(
                base, family=family, family_size=sizes[family], n_units=p.units, n_seeds=spec.train.seeds
            )
        else:
            sd, source = DEFAULT_NOISE[cls]
            noise = power.Noise(
                endpoint=cls,
                family=family,
                family_size=sizes[family],
                unit=CLASS_UNITS[cls],
                unit_sd=sd,
                n_units=p.units,
                n_seeds=spec.train.seeds,
                source=source,
            )
        if noise.seed_sd is None and cls in DEFAULT_SEED_SD:
            sd, source = DEFAULT_SEED_SD[cls]
            noise = replace(noise, seed_sd=math.sqrt(2.0) * sd, seed_source=source)
        plans.append(
            power.plan_endpoint(noise, float(getattr(spec.eval.target_mde, cls)), inf.ALPHA, inf.POWER)
        )
    return PowerCheck(plans, pilot.name if pilot else None, planned, _key_notes(spec))


def _key_notes(spec: ExperimentSpec) -> list[str]:
    """Whether passkey's keys per length give the effective context length an informative interval."""

    if "passkey" not in spec.eval.evals:
        return []
    passkey = PasskeySettings.of(spec.eval)
    depths = len(passkey.passkey_depths)
    note = keys_note(depths * passkey.passkey_trials, depths)
    return [note] if note else []


def check_experiment(spec: ExperimentSpec, l0: int | None) -> PowerCheck:
    """`check_spec` with the experiment's own evals as the pilot when it has some (a previous run), else the
    default noise. `spec` is resolved (`load_spec`)."""

    layout = ExperimentLayout(spec.results_dir or default_results_root(), spec.experiment)
    pilot = None
    if any(layout.root.glob("evals/*/eval.json")):
        pilot = pilot_noise.read_pilot(layout)  # the baseline its resolved spec names, else rope
    return check_spec(spec, l0, pilot)
