"""Several experiments in one report (`rlab compare A B`): their arms side by side, labelled `<experiment>/<arm>`.

Two ways to pair:

* by default every arm of the later experiments is compared with **the same arm of the first** (B/yarn vs
  A/yarn, B/pi vs A/pi): "what did experiment B change?";
* with a baseline (``A/rope``, or an arm name found in one of them) every arm is compared with that one arm.

The statistics are one experiment's (`rlab.report.assemble.collect.assemble`): cluster bootstrap over documents,
Holm over each family, unit counts. Across experiments a difference is paired only on an eval section both
measured exactly alike (settings, data and code hashes): otherwise the unit ids would not name the same text,
so that metric gets no estimate and the verdict "not comparable", and the report says what differs. Training
may differ between experiments by design (that is usually the question): it is listed, not blocking. When
nothing at all is comparable, `collect_comparison` raises instead of writing an empty report.

This module collects the comparison; `rlab.report.comparison_document` says and writes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from rlab.errors import RlabError, unknown_name_error
from rlab.paths import ExperimentLayout
from rlab.records.base import ContractError
from rlab.report.assemble.collect import assemble
from rlab.report.assemble.pairing import Pairing
from rlab.report.assemble.report_data import ReportData
from rlab.report.assemble.verdict_diff import verdict_diff
from rlab.report.sources import comparability as cmp
from rlab.report.sources import numerics
from rlab.report.sources.arms import Arm, group_arms
from rlab.report.sources.tag_files import ExperimentSources, read_experiment
from rlab.report.stats import uncertainty as unc


@dataclass
class Comparison:
    experiments: list[str]
    data: ReportData
    """The combined report data: arms keyed `<experiment>/<arm>`."""
    by_arm: bool
    """True: each arm vs the same arm of the first experiment; False: every arm vs one baseline arm."""
    primary_from: str = ""
    """The experiment whose training length defines the primary endpoint."""
    training_notes: list[str] = field(default_factory=list)
    """How compared arms of different experiments were trained differently, under which numerics, and how
    their own reports' verdicts differ (informational)."""


def _local_key(arm: Arm) -> str:
    return arm.key.removeprefix(f"{arm.group}/")


def check_experiment(layout: ExperimentLayout) -> None:
    """An error (one line and a hint) unless `layout` is an experiment with at least one eval."""
    if not layout.root.is_dir():
        root = layout.results_root
        found = (
            sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
            if root.is_dir()
            else []
        )
        error = unknown_name_error(f"experiment (under {root})", layout.experiment, found) if found else None
        raise RlabError(
            error.message if error else f"No experiment '{layout.experiment}' under {root}.",
            "Name experiments by their folder under the results dir (--results-dir), or pass spec files.",
        )
    if not any(layout.root.glob("evals/*/eval.json")):
        raise RlabError(
            f"Experiment '{layout.experiment}' has no evals yet (no eval.json under "
            f"{layout.root / 'evals'}).",
            f"Evaluate its tags first: rlab eval --all -e {layout.experiment}",
        )


def combined_sources(layouts: list[ExperimentLayout]) -> ExperimentSources:
    """Every experiment's tags, renamed `<experiment>/<tag>` and grouped by experiment."""
    names = [lay.experiment for lay in layouts]
    if len(layouts) < 2:
        raise RlabError("Compare needs at least two experiments.", "Name two or more: rlab compare A B.")
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise RlabError(
            f"Experiment '{twice}' is named twice; its arms would be indistinguishable.",
            "Name each experiment once (rename a copy's folder to compare two results dirs).",
        )
    tags, notes, variants = [], [], []
    for lay in layouts:
        check_experiment(lay)
        src = read_experiment(lay)
        notes += [f"{lay.experiment}: {n}" for n in src.notes]
        for t in src.tags:
            if t.eval is None:  # a comparison is of measured arms only
                continue
            name = f"{lay.experiment}/{t.tag}"  # also in eval.json's copy, so that mismatches name it so
            tags.append(
                dataclasses.replace(
                    t, tag=name, group=lay.experiment, eval=t.eval.model_copy(update={"tag": name})
                )
            )
        variants += [f"{lay.experiment}/{v}" for v in src.variants]
    return ExperimentSources(" vs ".join(names), layouts[0], tags, spec=None, notes=notes, variants=variants)


def _pick_baseline(arms: list[Arm], name: str, order: list[str]) -> Arm:
    """`A/rope` exactly (any case), or `rope`: that arm of the first experiment (in `order`) that has it."""
    for arm in arms:
        if arm.key.lower() == name.lower():
            return arm
    for group in order:
        for arm in arms:
            if arm.group == group and _local_key(arm).lower() == name.lower():
                return arm
    error = unknown_name_error("baseline arm", name, [a.key for a in arms])
    raise RlabError(
        f"{error.message.rstrip('.')} (in none of {', '.join(order)}).",
        "Pass EXPERIMENT/ARM or an arm one of them has to --baseline, or leave it out to compare each "
        "arm with the same arm of the first experiment.",
    )


def _select(arms: list[Arm], wanted: list[str] | None) -> list[Arm]:
    if not wanted:
        return arms
    keys = {w.lower() for w in wanted}
    picked = [a for a in arms if a.key.lower() in keys or _local_key(a).lower() in keys]
    missing = [
        w for w in wanted if not any(w.lower() in (a.key.lower(), _local_key(a).lower()) for a in arms)
    ]
    if missing:
        error = unknown_name_error(
            "arm", missing[0], sorted({_local_key(a) for a in arms} | {a.key for a in arms})
        )
        raise RlabError(
            error.message, "Pass arms as NAME (in every experiment) or EXPERIMENT/NAME to --arms."
        )
    return picked


def _training_notes(
    arms: list[Arm], refs: dict[str, Arm], separate: frozenset[str], sources: ExperimentSources
) -> list[str]:
    docs = {t.tag: t.eval for t in sources.tags}
    out = []
    for arm in arms:
        ref = refs.get(arm.key)
        if arm.key not in separate or ref is None or arm.kind != ref.kind:
            continue
        a, b = docs.get(arm.tags[0]), docs.get(ref.tags[0])
        if a is None or b is None:
            continue
        found = [m for m in cmp.mismatches(a, b) if m.section == cmp.TRAINING]
        if a.train_seq_len != b.train_seq_len:
            found.insert(
                0,
                cmp.Mismatch(
                    a.tag,
                    b.tag,
                    cmp.TRAINING,
                    "training length",
                    f"{a.train_seq_len} vs {b.train_seq_len} tokens",
                ),
            )
        if found:
            out.append(
                f"{arm.key} and {ref.key} were trained differently ("
                + "; ".join(f"{m.what}: {m.detail}" for m in found)
                + "): their difference includes that, not only the RoPE setting."
            )
    return out


def collect_comparison(
    layouts: list[ExperimentLayout],
    *,
    baseline: str | None = None,
    arms: list[str] | None = None,
    seed: int = 0,
    draws: int = unc.DEFAULT_DRAWS,
) -> Comparison:
    """Read the experiments, pair their arms, and compute every estimate and verdict."""
    sources = combined_sources(layouts)
    order = [lay.experiment for lay in layouts]
    all_arms = group_arms(sources.tags)
    chosen = _select(all_arms, arms)
    base = _pick_baseline(all_arms, baseline, order) if baseline else None
    if base is not None and base not in chosen:
        chosen = [base, *chosen]
    keep = {t for a in chosen for t in a.tags}
    sources.tags = [t for t in sources.tags if t.tag in keep]
    if base is not None:
        refs = {a.key: base for a in chosen if a.key != base.key}
        label = base.key
    else:
        first = {_local_key(a): a for a in chosen if a.group == order[0]}
        refs = {a.key: first[_local_key(a)] for a in chosen if a.group != order[0] and _local_key(a) in first}
        label = order[0]
    if not refs:
        raise RlabError(
            f"No arm of {', '.join(order[1:])} has a counterpart in {order[0]} to compare with "
            f"({', '.join(a.key for a in chosen)}).",
            "Pick one arm to compare everything with: --baseline EXPERIMENT/ARM.",
        )
    separate = frozenset(k for k, r in refs.items() if r.group != k.split("/", 1)[0])
    pairing = Pairing(
        label, base, refs, separate, primary_from=(base.group if base else order[0]), rank_arms=False
    )
    data = assemble(sources, chosen, pairing, seed=seed, draws=draws)
    _refuse_if_nothing_comparable(data, separate)
    return Comparison(
        order,
        data,
        by_arm=base is None,
        primary_from=pairing.primary_from or order[0],
        training_notes=_training_notes(chosen, refs, separate, sources)
        + [n for n in [numerics.experiments_note(sources.tags)] if n]
        + _verdict_notes(layouts),
    )


def _verdict_notes(layouts: list[ExperimentLayout], shown: int = 4) -> list[str]:
    """How each later experiment's own results.csv verdicts differ from the first's (same arm, same column):
    for a rerun of one experiment, what it reproduced (`rlab.report.assemble.verdict_diff`)."""

    first, out = layouts[0], []
    for lay in layouts[1:]:
        try:
            diff = verdict_diff(first.results_csv, lay.results_csv)
        except ContractError:  # no results.csv yet, or one an older rlab wrote: nothing to say
            continue
        if not diff.compared:
            continue
        listed = (diff.directional or diff.changes)[:shown]  # those to or from better/worse first
        more = len(diff.changes) - len(listed)
        changed = "; ".join(c.sentence() for c in listed) + (f"; and {more} more" if more > 0 else "")
        out.append(
            f"{first.experiment}'s and {lay.experiment}'s own reports: {diff.summary()}"
            + (f" ({changed})" if listed else "")
            + "."
        )
    return out


def _refuse_if_nothing_comparable(data: ReportData, separate: frozenset[str]) -> None:
    """An error naming what differs when no metric of any cross-experiment pair could be paired."""
    cross = data.comparisons[data.comparisons["arm"].isin(separate)]
    if cross.empty or cross["diff"].notna().any():
        return
    what = list(dict.fromkeys(m.sentence() for m in data.mismatches))
    if not what:
        return  # nothing was measured by both sides: the tables say so, there is no verdict to refuse
    more = f" (and {len(what) - 2} more)" if len(what) > 2 else ""
    raise RlabError(
        f"Nothing comparable across the experiments: {'; '.join(what[:2])}{more}.",
        "Evaluate them with the same eval settings and code (e.g. the same --lengths), then compare again.",
    )
