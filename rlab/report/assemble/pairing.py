"""What each arm is compared with, and which comparisons a mismatch blocks.

`resolve_baseline` names the baseline variant, `Pairing` says what each arm is compared with (one experiment:
the baseline arm; several: `rlab.report.assemble.compare`), `control_missing` catches continued arms without a
continued control. `arm_mismatches` finds how compared tags differ (`rlab.report.sources.comparability`) and
`block_verdicts` replaces the verdicts a mismatch touches with `NOT_COMPARABLE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rlab.errors import RlabError, unknown_name_error
from rlab.orchestrate.control import add_control_command
from rlab.report.sources import comparability as cmp
from rlab.report.sources.arms import Arm
from rlab.report.sources.tag_files import TagSources
from rlab.report.stats.verdicts import Verdict
from rlab.variants import BASELINE_VARIANT, VARIANT_NAMES

NOT_COMPARABLE = Verdict.NOT_COMPARABLE
"""The verdict where the compared tags were not evaluated or trained alike (`rlab.report.sources.comparability`)."""
ESTIMATE_COLUMNS = ("diff", "diff_low", "diff_high", "rel_pct", "rel_low", "rel_high", "se", "p_value")
"""A comparison's estimate, cleared where its verdict is `NOT_COMPARABLE`."""


def resolve_baseline(requested: str | None) -> str:
    """The baseline variant: the flag, else `rope` (a spec names no baseline: `rlab.spec.experiment.ExperimentSpec`)."""
    return requested or BASELINE_VARIANT


def known_variant(name: str, variants: set[str]) -> str:
    """`name` as one of the experiment's variants (any case), or an error with a "did you mean".

    A built-in variant name the experiment has no outputs for is left to the report's footnote."""

    if name in variants or not variants:
        return name
    by_lower = {v.lower(): v for v in (*VARIANT_NAMES, *variants)}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    error = unknown_name_error("baseline variant", name, variants)
    raise RlabError(error.message, "Pass one of them to --baseline.")


def arm_mismatches(
    arms: list[Arm], refs: dict[str, Arm], tags: list[TagSources], separate: frozenset[str] = frozenset()
) -> dict[str, list[cmp.Mismatch]]:
    """Per arm: how its tags differ from its reference arm's first tag (evals; training too when both arms are the
    same condition, e.g. continued vs continued, and from one experiment: an arm in `separate` is compared with
    another experiment's arm, whose training may differ by design) and from their own arm's first tag (seeds)."""
    docs = {t.tag: t.eval for t in tags}
    out: dict[str, list[cmp.Mismatch]] = {}
    for arm in arms:
        found: list[cmp.Mismatch] = []
        reference = refs.get(arm.key, arm)
        ref, own = docs.get(reference.tags[0]), docs.get(arm.tags[0])
        for tag in arm.tags:
            doc = docs.get(tag)
            if doc is None:
                continue
            if ref is not None and tag != reference.tags[0]:
                found += cmp.mismatches(
                    doc, ref, check_training=arm.kind == reference.kind and arm.key not in separate
                )
            if own is not None and tag != arm.tags[0]:
                found += cmp.mismatches(doc, own)
        out[arm.key] = list(dict.fromkeys(found))
    return out


def block_verdicts(
    comparisons: pd.DataFrame,
    found: dict[str, list[cmp.Mismatch]],
    unpaired: set[tuple[str, str]] | frozenset = frozenset(),
) -> pd.DataFrame:
    """`NOT_COMPARABLE` in place of every verdict a mismatch concerns (and of the estimates left `unpaired`).

    Its estimate goes too: a difference between two things measured differently is not one to print."""
    frame = comparisons.copy()
    estimate = [c for c in ESTIMATE_COLUMNS if c in frame.columns]
    for i, r in zip(frame.index, frame.itertuples(index=False), strict=True):
        measured = not math.isnan(r.diff)
        if (measured or (r.arm, r.metric) in unpaired) and cmp.blocks(found.get(r.arm, []), r.metric):
            frame.at[i, "verdict"] = NOT_COMPARABLE
            frame.loc[i, estimate] = math.nan
    return frame


def control_missing(arms: list[Arm], base: Arm | None) -> bool:
    """Continued arms but no continued baseline arm: nothing trained alike to compare them with. Against the
    baseline's zero-shot arm or the base checkpoint, a difference would mix the RoPE change with the training."""
    return any(a.kind == "continued" for a in arms) and (base is None or base.kind != "continued")


def missing_control_note(baseline: str, resolved_spec: Path) -> str:
    """The footnote of a report without its control arm, naming the command that trains it."""

    return (
        f"no continued '{baseline}' arm (the control): the continued arms get no better/worse verdict, since "
        "against the base or a training-free arm a difference would mix the RoPE change with the training; "
        f"train the control with `{add_control_command(resolved_spec, baseline)}`, then rerun `rlab eval --all`"
    )


@dataclass
class Pairing:
    """What each arm is compared with. One experiment: every arm with the baseline arm (`reference_arm`).
    Several experiments (`rlab.report.assemble.compare`): arms whose reference is in another experiment are listed in
    `separate`: they are paired only on eval sections measured exactly alike (else no estimate at all: their
    units would not be the same text), and their training may differ by design (reported, not blocking)."""

    baseline: str
    """The baseline's name as tables print it (a variant, or what the arms are compared with)."""
    base: Arm | None
    """The baseline arm (first row of tables), if there is one."""
    references: dict[str, Arm]
    """Arm key -> the arm it is compared with (arms without an entry are not compared)."""
    separate: frozenset[str] = frozenset()
    primary_from: str | None = None
    """The experiment whose training length defines the primary endpoint (None: the most common one)."""
    rank_arms: bool = True
    """Mark the arm that beats every other beyond noise ("best"), as one experiment's tables do."""
    missing_control: str | None = None
    """Why continued arms are not compared (`control_missing`), as its footnote says it; None when they are."""
