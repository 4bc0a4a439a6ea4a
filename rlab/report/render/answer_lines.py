"""The lines under the Answer: the families (said once), the seeds, which MDEs the seeds set, a warning.

`rlab.report.render.answer` builds the table; these are the few sentences a reader needs beside it.
"""

from __future__ import annotations

from rlab.report.assemble.report_data import ReportData
from rlab.report.estimands import section as estimands_section
from rlab.report.power import pilot, planner
from rlab.report.render import document as doc
from rlab.report.render import headline
from rlab.report.render import methods as mth
from rlab.report.stats import verdicts as vd
from rlab.report.stats.estimates import families
from rlab.report.stats.verdicts import Verdict


def _seed_line(data: ReportData) -> str:
    """What the seeds cover: continuation noise, and pretraining noise only where the bases are replicated (the
    base and zero-shot arms on one base are one model each: a rerun that pretrains another base moves them)."""
    seeds = sorted({a.n_seeds for a in data.arms if a.kind == "continued"})
    if not seeds:
        return ""
    if seeds == [1]:
        return (
            "Seeds: 1 per arm, so the intervals cover evaluation noise, not training noise (a verdict that covers "
            "it needs ≥ 2 seeds per arm: `rlab continue --seeds S`)."
        )
    counts = " to ".join(str(s) for s in (seeds[0], seeds[-1]) if s) if len(seeds) > 1 else str(seeds[0])
    if not lone_models(data):
        return f"Seeds: {counts} per arm; intervals and tests cover training noise (Methods: Tests)."
    return (
        f"Seeds: {counts} per continued arm, on one base: intervals and tests cover continuation noise. The base "
        "and the zero-shot arms are one model each: their verdicts cover evaluation noise only, so a rerun that "
        "pretrains another base (another machine or dtype) may move verdicts near their thresholds; several replicated "
        "bases (`train.replicate_base`) cover it (docs/reproducibility.md)."
    )


def lone_models(data: ReportData) -> bool:
    """Whether the base or a zero-shot arm is one model (no replicated bases): its noise is not in any interval."""
    return any(a.kind != "continued" and a.n_seeds == 1 for a in data.arms)


def unresolved_line(data: ReportData) -> str:
    """How many "within noise" MDEs their seeds set (`inference.Comparison.seed_limited`), and
    what `rlab power` plans for the primary endpoint's target from this experiment's own noise."""
    c = data.comparisons
    if c is None or "seed_limited" not in c:
        return ""
    hit = c[(c["verdict"] == Verdict.WITHIN_NOISE.value) & c["seed_limited"].fillna(False).astype(bool)]
    if hit.empty:
        return ""
    total = int((c["verdict"] == Verdict.WITHIN_NOISE.value).sum())
    out = (
        f'{len(hit)} of the {total} "within noise" MDEs are set by the seeds ("{vd.SEED_MDE}"): the training noise, '
        f"estimated from {int(hit['n_seeds'].max())} seeds per arm at most and taken at its 90% upper bound, alone "
        f"(with unlimited documents) gives each a larger MDE than its documents alone give, so more seeds, not more "
        f"documents, shrink them"
    )
    return out + plan_hint(data)


def plan_hint(data: ReportData) -> str:
    """`rlab power`'s plan for the primary endpoint's target from this experiment's noise, as a clause."""
    plans = [
        p
        for p in planner.plan(pilot.noise_from_report(data, data.experiment), pilot.stated_targets(data))
        if p.noise.family == "primary"
    ]
    if not plans or (option := plans[0].with_seeds) is None:
        return f"; `rlab power -e {data.experiment}` says how many seeds would."
    return (
        f"; `rlab power -e {data.experiment}`: {option.seeds} seeds of {option.units} {plans[0].noise.unit} detect "
        f"{plans[0].target:g} on the primary endpoint."
    )


def _mismatch_line(data: ReportData) -> str:
    """Which tags were not measured alike, in a few words (the Warnings section has the details)."""
    pairs: dict[tuple[str, str], dict[str, list[str]]] = {}
    for m in data.mismatches:
        pairs.setdefault((m.tag, m.other), {}).setdefault(m.what, []).append(f"`{m.section}`")
    said = "; ".join(
        f"{a} vs {b} ("
        + "; ".join(f"{', '.join(dict.fromkeys(s))} {what}" for what, s in whats.items())
        + " differ)"
        for (a, b), whats in pairs.items()
    )
    return f"Not comparable, so no verdict: {said}."


def lines(data: ReportData, warnings: list[str]) -> list[doc.Text]:
    """The three lines under the table: the families (said once), the seeds, the most important warning."""
    out = [
        doc.text(
            doc.prose(
                f"Verdicts: {mth.families_line(declared_families(data))}"
                + (f" ({whole})" if (whole := vd.families_note(declared_families(data))) else "")
                + f"; intervals: {mth.INTERVAL}s, unadjusted; "
            ),
            doc.strong(mth.TITLE),
            " below.",
        )
    ]
    out += [doc.prose(line) for line in headline.worse_extenders(data)]
    if waiting := _unevaluated_line(data):
        out.append(doc.prose(waiting))
    if seed := _seed_line(data):
        out.append(doc.prose(seed))
    if unresolved := unresolved_line(data):
        out.append(doc.prose(unresolved))
    first = _mismatch_line(data) if data.mismatches else (warnings[0] if warnings else "")
    if first:
        n_more = len(warnings) - 1
        more = f" ({n_more} more under Warnings and notes.)" if n_more > 0 else ""
        out.append(doc.prose(f"Warning: {first}{more}"))
    return out


def _unevaluated_line(data: ReportData) -> str:
    """The tags with no eval.json yet (a chain stopped before `rlab eval`, or evals still running): their rows are
    empty, and the first screen says why and what fills them."""
    if data.sources is None:
        return ""
    tags = [t.tag for t in data.sources.tags if t.eval is None]
    if not tags:
        return ""
    return (
        f"Not evaluated yet: {len(tags)} of {len(data.sources.tags)} tags ({', '.join(tags)}); their rows fill in "
        f"after `rlab eval --spec {data.sources.layout.resolved_spec} --all`."
    )


def declared_families(data: ReportData) -> list[vd.Family]:
    """Every family of verdicts the report declares: the tables', the copy section's, the estimands'."""
    from rlab.report.copy_distance.section import family  # noqa: PLC0415 - defers matplotlib, torch

    copy = [family(data.copy_cells)] if data.copy_cells is not None and not data.copy_cells.empty else []
    return list(families(data.comparisons).values()) + copy + estimands_section.families(data)
