"""Where `rlab power` takes its noise from: an experiment's evals as a pilot, or SDs stated on the command line.

Stated unit SDs with no pilot named stand alone (one endpoint per name). Otherwise the experiment's per-unit files
are the pilot (`pilot_noise.read_pilot`), and stated SDs replace its own by endpoint or class (`power.with_stated`).
The targets are the spec's when one is given, else the pilot's, else the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rlab.errors import RlabError
from rlab.paths import ExperimentLayout
from rlab.report.power import pilot as pilot_noise
from rlab.report.power import planner as power
from rlab.report.power.spec import CLASS_UNITS
from rlab.spec.eval import TargetMde


@dataclass(frozen=True)
class StatedNoise:
    """What the user states instead of (or on top of) a pilot."""

    unit_sd: dict[str, float] = field(default_factory=dict)
    """Unit SD of a paired difference by endpoint or class."""
    seed_sd: dict[str, float] = field(default_factory=dict)
    """Run-to-run SD of one arm by endpoint or class (x√2 for a difference)."""
    family_size: int | None = None
    """Comparisons per family (MDE at alpha / m), instead of the pilot's."""
    endpoints: frozenset[str] | None = None
    """Only these endpoints or classes."""

    def stands_alone(self, pilot_named: bool) -> bool:
        """Whether the stated SDs are the whole noise: unit SDs given and no experiment or spec named."""
        return not pilot_named and bool(self.unit_sd)


@dataclass(frozen=True)
class PlanInputs:
    """The noise of each endpoint to plan, the targets, and where they came from."""

    noises: list[power.Noise]
    targets: TargetMde
    pilot: str | None
    """The pilot experiment (None: the stated SDs alone)."""
    notes: list[str] = field(default_factory=list)


def plan_inputs(
    stated: StatedNoise,
    pilot: ExperimentLayout | None,
    spec_targets: TargetMde | None = None,
    baseline: str | None = None,
    spread: pilot_noise.Spread = "median",
) -> PlanInputs:
    """The endpoints to plan from `pilot`'s evals (None: the stated SDs alone), stated SDs applied on top."""
    if pilot is None:
        noises, name, notes, targets = _stated_only(stated), None, [], spec_targets
    else:
        if not any(pilot.root.glob("evals/*/eval.json")):
            raise RlabError(
                f"Experiment '{pilot.experiment}' has no evals to serve as a pilot (no eval.json under "
                f"{pilot.root}/evals).",
                "Run a small pilot first (rlab eval), or state the noise: rlab power --unit-sd core=0.57 ...",
            )
        read = pilot_noise.read_pilot(pilot, baseline, spread)
        noises = power.with_stated(read.noises, stated.unit_sd, stated.seed_sd)
        name, notes, targets = (
            read.name,
            read.notes,
            spec_targets if spec_targets is not None else read.targets,
        )
    if stated.family_size is not None:
        noises = [replace(n, family_size=stated.family_size) for n in noises]
    if stated.endpoints is not None:
        wanted = stated.endpoints
        noises = [
            n for n in noises if n.endpoint in wanted or power.endpoint_class(n.endpoint, n.family) in wanted
        ]
    if not noises:
        raise RlabError("No endpoint to plan.", "Check --endpoints, or state one: --unit-sd core=0.57.")
    return PlanInputs(noises, targets if targets is not None else TargetMde(), name, notes)


def _stated_only(stated: StatedNoise) -> list[power.Noise]:
    """Endpoints known only from stated SDs (no pilot): one per name given a unit SD."""
    out = []
    for name in stated.unit_sd:
        cls = name if name in power.CLASSES else power.endpoint_class(name, "")
        out.append(
            power.Noise(
                endpoint=name,
                family=power.class_family(cls),
                family_size=stated.family_size or 1,
                unit=CLASS_UNITS.get(cls, power.unit_word(name)),
                unit_sd=None,
            )
        )
    return power.with_stated(out, stated.unit_sd, stated.seed_sd)
