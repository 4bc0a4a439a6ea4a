"""How many comparisons the report's primary and secondary families will hold, counted from a spec.

The dry run's power line plans each endpoint class at alpha / m of its family (`power.spec`), so m must be what
`rlab report` will Holm-adjust over. The comparisons are listed by the report's own rules: the arms the spec
makes (`arms.arm_key`), what each is compared with (`arms.baseline_arm`, `arms.reference_arm`), the metrics an
arm is compared on, and the family of each (`arm_comparisons.family_of`). A comparison then stays out of the
count where the report would leave it out of every family: fewer units than `inference.MIN_UNITS` (planned,
else the pilot's), or, when the experiment already has evals (the pilot), the report left the same
comparison out for a reason more units do not change (not comparable, no variation). What neither tells
(train/val BPB's documents without a pilot) counts in: from above, so a planned MDE is never optimistic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from rlab.report.assemble.arm_comparisons import compared_on, family_of
from rlab.report.assemble.endpoints import EXTENSION_MULTIPLES
from rlab.report.assemble.pairing import resolve_baseline
from rlab.report.power.planner import endpoint_class
from rlab.report.sources.arms import Arm, ArmKind, arm_key, baseline_arm, reference_arm
from rlab.report.stats import estimates as est
from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd

if TYPE_CHECKING:
    from rlab.spec.experiment import ExperimentSpec

SPLIT_BPB = ("train_bpb", "val_bpb")
"""Whole-split BPB: its units are the split's documents (`eval.bpb_tokens` of them), which no setting plans."""


def planned_arms(spec: ExperimentSpec) -> list[Arm]:
    """The arms `rlab continue` makes: each variant continued (train.steps > 0), and its training-free arm
    with the base model as a reference arm (train.steps 0, or train.zero_shot)."""
    kinds: list[ArmKind] = []
    if spec.train.steps > 0:
        kinds.append("continued")
    if spec.train.steps == 0 or spec.train.zero_shot:
        kinds.append("zero-shot")
    arms = [Arm(key=arm_key(v, kind), variant=v, kind=kind) for kind in kinds for v in spec.variants]
    if "zero-shot" in kinds:
        arms.append(Arm(key=arm_key("base", "base"), variant="base", kind="base"))
    return arms


def planned_primary(spec: ExperimentSpec, lengths: list[int]) -> str:
    """The primary metric `endpoints.choose_primary` will pick: BPB at length (at 2T or 4T where measured, else
    T), else val BPB (T: the continued training length)."""
    target = spec.train.seq_len
    if spec.train.steps == 0 or "bpb_length" not in spec.eval.evals or target not in lengths:
        return "val_bpb"
    return est.PRIMARY


def _extension_planned(spec: ExperimentSpec, lengths: list[int]) -> bool:
    """Whether the extension is measured beside the primary endpoint (a secondary comparison)."""
    target = spec.train.seq_len
    return planned_primary(spec, lengths) == est.PRIMARY and any(
        m * target in lengths for m in EXTENSION_MULTIPLES
    )


def arm_metrics(spec: ExperimentSpec, lengths: list[int]) -> list[str]:
    """The metrics every arm is compared on, in the report's order (`collect._metrics_of`)."""
    evals = spec.eval.evals
    primary = planned_primary(spec, lengths)
    names = [primary] if primary not in SPLIT_BPB or "bpb" in evals else []
    names += [est.EXTENSION] * _extension_planned(spec, lengths)
    names += [m for m in SPLIT_BPB if "bpb" in evals]
    names += [f"bpb_len_{length}" for length in lengths if "bpb_length" in evals]
    names += ["core"] * ("core" in evals) + ["passkey_overall"] * ("passkey" in evals)
    return list(dict.fromkeys(names))


class PlannedComparison(NamedTuple):
    """One comparison the report will make: `arm` vs `reference` on `metric`, tested in `family`."""

    arm: str
    reference: str
    metric: str
    family: str


def planned_comparisons(spec: ExperimentSpec, lengths: list[int]) -> list[PlannedComparison]:
    """Every comparison the report will make (before its tests decide which enter their family)."""
    arms = planned_arms(spec)
    baseline = resolve_baseline(None)
    if baseline not in spec.variants and spec.variants:
        baseline = next(iter(spec.variants))  # the report will need `--baseline`: one variant, as any other
    base = baseline_arm(arms, baseline)
    out = []
    for arm in arms:
        ref = reference_arm(arm, arms, base) if base is not None else arm
        if ref.key != arm.key:
            out += [
                PlannedComparison(arm.key, ref.key, m, family_of(m, arm.kind))
                for m in arm_metrics(spec, lengths)
                if compared_on(m, arm.kind)
            ]
    return out


def family_sizes(
    spec: ExperimentSpec,
    lengths: list[int],
    units: dict[str, int | None],
    pilot: pd.DataFrame | None = None,
) -> dict[str, int]:
    """Comparisons in the primary and secondary families. `units`: planned units per endpoint class
    (`power.endpoint_class`); `pilot`: the report's comparisons of the experiment's own evals, when it has some."""
    known: dict[tuple[str, str], tuple[str, Any, Any]] = {}
    if pilot is not None:
        columns = [pilot[c] for c in ("arm", "metric", "family", "verdict", "n_units")]
        known = {(str(a), str(m)): (str(f), v, n) for a, m, f, v, n in zip(*columns, strict=True)}
    sizes = dict.fromkeys(est.FAMILIES, 0)
    for c in planned_comparisons(spec, lengths):
        family, verdict, pilot_units = known.get((c.arm, c.metric), (None, None, None))
        if family == "" and verdict != vd.Verdict.TOO_FEW_UNITS:
            continue  # not comparable, no variation, no units: more units would not change that
        n = None if c.metric in SPLIT_BPB else units.get(endpoint_class(c.metric, c.family))
        if n is None and pilot_units is not None and not pd.isna(pilot_units):
            n = int(pilot_units)
        if n is None or n >= inf.MIN_UNITS:
            sizes[c.family] += 1
    return sizes
