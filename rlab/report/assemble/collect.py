"""Eval outputs + training metrics -> tidy frames, arms, estimates with their units, and comparisons.

`collect(layout, baseline=...)` returns a `ReportData`: long per-tag frames (BPB by length, passkey
cells, per-task CORE, training curves), the arms (variant x condition, seeds grouped), per-arm and
per-tag estimates with intervals and unit counts (`estimates`), comparisons of every arm with the
baseline arm (the primary endpoint and the Holm-adjusted secondary family), and `results`, the wide
one-row-per-tag frame written to results.csv (`wide`). Nothing here renders or writes.

Missing pieces are blanks (NaN / "") plus a numbered footnote, never an exception.
"""

from __future__ import annotations

import logging
import math

import pandas as pd

from rlab.evals.bpb.records import BpbMetric
from rlab.evals.bpb_length.records import BpbLengthMetric
from rlab.evals.core.records import CoreMetric
from rlab.evals.passkey.records import PasskeyMetric
from rlab.paths import ExperimentLayout
from rlab.report.assemble import arm_comparisons as ac
from rlab.report.assemble.endpoints import Primary, add_units, choose_primary, context_caps, dynamic_ntk_note
from rlab.report.assemble.measured import Footnotes, Measured
from rlab.report.assemble.pairing import (
    Pairing,
    arm_mismatches,
    block_verdicts,
    control_missing,
    known_variant,
    missing_control_note,
    resolve_baseline,
)
from rlab.report.assemble.report_data import ReportData
from rlab.report.assemble.wide import ID, wide_frame
from rlab.report.copy_distance import section as copy_distance
from rlab.report.estimands import analyse_all
from rlab.report.sources import comparability as cmp
from rlab.report.sources import frames as fr
from rlab.report.sources.arms import Arm, baseline_arm, group_arms, kind_of, reference_arm, seed_of
from rlab.report.sources.tag_files import ExperimentSources, TagSources, read_experiment
from rlab.report.stats import estimates as est
from rlab.report.stats import uncertainty as unc

log = logging.getLogger(__name__)

SCALAR_COLUMNS = ["metric", "value", "ci_low", "ci_high", "n_units", "n_seeds", "interval"]


# ---------------------------------------------------------------- per-tag inputs to the statistics


def _tag_data(src: TagSources, bpb_len: pd.DataFrame, passkey: pd.DataFrame, primary: Primary) -> est.TagData:
    units, clustered = est.units_by_metric(src.csvs.get("bpb_units"))
    data = est.TagData(tag=src.tag, units=units, clustered=clustered)
    bpb = src.section(BpbMetric)
    splits = {"train": bpb.train if bpb else None, "val": bpb.val if bpb else None}
    for split, entry in splits.items():
        data.points[f"{split}_bpb"] = fr.num(entry.bpb if entry is not None else None)
    for r in bpb_len.itertuples(index=False):
        data.points[f"bpb_len_{r.length}"] = fr.num(r.bpb)
    core = src.section(CoreMetric)
    if core is not None:
        data.points["core"] = fr.num(core.core)
        data.core_examples = src.csvs.get("core_examples")
    data.passkey = passkey if len(passkey) else None
    data.passkey_trials = src.csvs.get("passkey_trials")
    add_units(data, primary)
    return data


def _metrics_of(datas: list[est.TagData], has_core: bool, has_passkey: bool, primary: Primary) -> list[str]:
    names = {m for d in datas for m, v in d.points.items() if not math.isnan(v)}
    lengths = sorted(int(m[8:]) for m in names if m.startswith("bpb_len_"))
    first = (primary.metric, est.EXTENSION, "train_bpb", "val_bpb")
    out = list(dict.fromkeys(m for m in first if m in names))
    out += [f"bpb_len_{L}" for L in lengths]
    if has_core:
        out.append("core")
    if has_passkey:
        out.append("passkey_overall")
    return out


def _scalars(
    groups: dict[str, list[str]],
    data: dict[str, est.TagData],
    metrics: list[str],
    baselines: dict[str, float],
    id_col: str,
) -> pd.DataFrame:
    rows = []
    for key, tags in groups.items():
        for r in est.group_scalars([data[t] for t in tags], metrics, baselines):
            rows.append({id_col: key, **r})
    return pd.DataFrame.from_records(rows, columns=[id_col, *SCALAR_COLUMNS])


# ---------------------------------------------------------------- entry point


def _tag_footnotes(src: TagSources, notes: Footnotes) -> list[int]:
    core, bpb_length = src.section(CoreMetric), src.section(BpbLengthMetric)
    extra = []
    used = [w.length for w in src.eval.attention.lengths] if src.eval and src.eval.attention else []
    used += [r.length for r in bpb_length.lengths] if bpb_length is not None else []
    dyn = dynamic_ntk_note(src, kind_of(src), used)
    marks = [notes.add(dyn)] if dyn is not None else []  # the note names its tag itself
    if core is not None and core.partial:
        missing = core.missing_tasks
        extra.append("partial CORE" + (f" (missing: {', '.join(missing)})" if missing else ""))
    if core is not None and core.selection is not None:
        extra.append(
            f"CORE on {len(core.selection)} of {core.bundle_tasks or '?'} tasks only "
            f"(eval.core_tasks: {', '.join(core.selection)}), not the full CORE"
        )
    passkey = src.section(PasskeyMetric)
    skips = {"BPB": bpb_length.skipped if bpb_length else [], "passkey": passkey.skipped if passkey else []}
    for what, skipped in skips.items():
        if skipped:
            extra.append(
                f"{what} not measured at length(s) {', '.join(str(s.length) for s in skipped)} (skipped by the "
                f"eval: {skipped[0].reason})"
            )
    return marks + [notes.add(f"{src.tag}: {msg}") for msg in [*src.notes, *extra]]


def collect(
    layout: ExperimentLayout,
    baseline: str | None = None,
    *,
    seed: int = 0,
    draws: int = unc.DEFAULT_DRAWS,
    allow_mismatch: bool = False,
) -> ReportData:
    """Read an experiment's outputs and assemble every frame of the report."""
    sources = read_experiment(layout)
    arms = group_arms(sources.tags)
    if baseline:  # the user named it: a typo is an error, not a report with blank comparison columns
        baseline = known_variant(baseline, {a.variant for a in arms} | set(sources.variants))
    requested = bool(baseline)
    baseline = resolve_baseline(baseline)
    base = baseline_arm(arms, baseline)
    refs = {a.key: r for a in arms if base is not None and (r := reference_arm(a, arms, base)).key != a.key}
    missing = None
    if not requested and control_missing(arms, base):
        refs = {
            key: ref for key, ref in refs.items() if next(a for a in arms if a.key == key).kind != "continued"
        }
        missing = missing_control_note(baseline, sources.layout.resolved_spec)
    pairing = Pairing(baseline, base, refs, missing_control=missing)
    return assemble(sources, arms, pairing, seed=seed, draws=draws, allow_mismatch=allow_mismatch)


def assemble(
    sources: ExperimentSources,
    arms: list[Arm],
    pairing: Pairing,
    *,
    seed: int = 0,
    draws: int = unc.DEFAULT_DRAWS,
    allow_mismatch: bool = False,
) -> ReportData:
    """Every frame of the report from tags already read and grouped into arms."""
    notes = Footnotes()
    tags = sources.tags
    baseline, base, refs = pairing.baseline, pairing.base, pairing.references
    meta_rows = []
    for src in tags:
        row = fr.meta_row(src.group or sources.experiment, src, sources.spec)
        arm = next(a for a in arms if src.tag in a.tags)
        row.update(arm=arm.key, kind=kind_of(src), seed=seed_of(src), n_seeds=arm.n_seeds, label=arm.key)
        meta_rows.append(row)
    meta_cols = [
        "experiment",
        "tag",
        "variant",
        "arm",
        "kind",
        "seed",
        *(f"rope_{f}" for f in fr.ROPE_FIELDS),
        "n_seeds",
        "step",
        "train_seq_len",
        "tokens_trained",
        "last_train_loss",
        *(c for c in fr.PROVENANCE if c not in ("step", "train_seq_len", "tokens_trained", "seed")),
        "evaluated",
        "label",
    ]
    meta = pd.DataFrame.from_records(meta_rows, columns=meta_cols)
    for col in ("seed", "n_seeds", "step", "train_seq_len", "tokens_trained", "skipped_steps"):
        meta[col] = meta[col].astype("Int64")

    keys = [(t.tag, t.variant) for t in tags]
    bpb_parts = [fr.bpb_length_frame(t) for t in tags]
    pk_parts = [fr.passkey_frame(t) for t in tags]
    core_parts = [fr.core_task_frame(t) for t in tags]
    bpb_length = fr.stack(bpb_parts, keys, ["length", "bpb", "ci_low", "ci_high", "tokens", "docs"])
    passkey = fr.stack(pk_parts, keys, ["length", "depth", "accuracy", "n"])
    core_tasks = fr.stack(core_parts, keys, ["task", "type", "accuracy", "centered", "baseline", "n"])
    curves = fr.stack([fr.curves_frame(t) for t in tags], keys, ["type", "step", "loss", "val_bpb"])

    caps = {t.tag: context_caps(t) for t in tags}
    primary = choose_primary(
        meta if pairing.primary_from is None else meta[meta["experiment"] == pairing.primary_from],
        bpb_length,
        caps,
    )
    data = {t.tag: _tag_data(t, bl, pk, primary) for t, bl, pk in zip(tags, bpb_parts, pk_parts, strict=True)}
    if pairing.missing_control is not None:
        notes.add(pairing.missing_control)
    elif base is not None and base.kind != "continued":
        notes.add(f"baseline variant '{baseline}' has no continued arm; compared against {base.key}")
    with_core = [
        p
        for p in ([core_parts[[t.tag for t in tags].index(base.tags[0])]] if base else []) + core_parts
        if len(p)
    ]
    baselines = (
        fr.task_baselines(with_core[0]) if with_core else {}
    )  # random-guess accuracy: a task's property
    metrics = _metrics_of(
        list(data.values()),
        any(d.core_examples is not None or "core" in d.points for d in data.values()),
        len(passkey) > 0,
        primary,
    )
    scalars = _scalars({a.key: a.tags for a in arms}, data, metrics, baselines, "arm")
    single = {a.key: a.tags[0] for a in arms if a.n_seeds == 1}
    reused = (
        scalars[scalars["arm"].isin(single)].assign(tag=lambda f: f["arm"].map(single)).drop(columns="arm")
    )
    others = {t: [t] for a in arms if a.n_seeds > 1 for t in a.tags}
    tag_scalars = pd.concat(
        [reused[["tag", *SCALAR_COLUMNS]], _scalars(others, data, metrics, baselines, "tag")],
        ignore_index=True,
    )
    kinds = {a.key: (a.variant, a.kind) for a in arms}
    scalars.insert(1, "variant", scalars["arm"].map(lambda k: kinds[k][0]))
    scalars.insert(2, "kind", scalars["arm"].map(lambda k: kinds[k][1]))

    if base is None and not refs and pairing.missing_control is None:
        notes.add(f"baseline variant '{baseline}' has no outputs: no comparisons")
    found = arm_mismatches(arms, refs, tags, pairing.separate) if refs else {}
    unpaired = {(a, m) for a in pairing.separate for m in metrics if cmp.blocks(found.get(a, []), m)}
    comparisons = ac.compare_arms(arms, refs, data, scalars, baselines, seed, draws, skip=unpaired)
    # --allow-mismatch never lifts the block across experiments: there the units are not the same text
    blocking = {a: found[a] for a in pairing.separate if a in found} if allow_mismatch else found
    # not comparable first, so that those comparisons never enter a Holm family
    comparisons = ac.adjust(block_verdicts(comparisons, blocking, unpaired))

    best = {
        m: k
        for m in metrics
        if pairing.rank_arms
        and m != "passkey_overall"
        and (
            allow_mismatch or not any(cmp.blocks(ms, m) for ms in found.values())
        )  # no "best" across a mismatch
        and (k := ac.best_arm(arms, data, scalars, m, baselines, seed, draws)) is not None
    }
    clustered = bool(data) and all(d.clustered for d in data.values() if d.units)
    if any(d.units for d in data.values()) and not clustered:
        notes.add(
            "BPB units do not name their documents (bpb_units.csv has no `doc` column): each unit is "
            "resampled as if independent, so intervals may be too narrow; re-run `rlab eval` with this "
            "version to get per-document units"
        )
    for msg in sources.notes:
        notes.add(msg)
    tag_notes = {src.tag: marks for src in tags if (marks := _tag_footnotes(src, notes))}

    measured = Measured(
        experiment=sources.experiment,
        baseline=baseline,
        baseline_tag=base.tags[0] if base else None,
        meta=meta,
        arms=arms,
        baseline_arm=base.key if base else None,
        primary=primary,
        scalars=scalars,
        tag_scalars=tag_scalars,
        comparisons=comparisons,
        bpb_length=bpb_length,
        passkey=passkey,
        core_tasks=core_tasks,
        curves=curves,
        footnotes=notes,
        clustered=clustered,
        tag_notes=tag_notes,
        sources=sources,
        best=best,
        context_caps=caps,
        mismatches=[m for ms in found.values() for m in ms],
        allow_mismatch=allow_mismatch,
    )
    copy_cells, copy_retention = copy_distance.analyse(measured, seed, draws)
    rows = analyse_all(measured, seed, draws)
    results = (
        wide_frame(measured, copy_cells=copy_cells, copy_retention=copy_retention, estimands=rows)
        if tags
        else pd.DataFrame(columns=list(ID))
    )
    out = ReportData.of(
        measured, copy_cells=copy_cells, copy_retention=copy_retention, estimands=rows, results=results
    )
    log.info(
        "collected %d tag(s) in %d arm(s) of experiment %s (baseline %s)",
        len(tags),
        len(arms),
        sources.experiment,
        baseline,
    )
    return out
