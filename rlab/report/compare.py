"""Several experiments in one report (`rlab compare A B`): their arms side by side, labelled `<experiment>/<arm>`.

Two ways to pair:

* by default every arm of the later experiments is compared with **the same arm of the first** (B/yarn vs
  A/yarn, B/pi vs A/pi): "what did experiment B change?";
* with a baseline (``A/rope``, or an arm name found in one of them) every arm is compared with that one arm.

The statistics are one experiment's (`rlab.report.collect.assemble`): cluster bootstrap over documents,
Holm over each family, unit counts. Across experiments a difference is paired only on an eval section both
measured exactly alike (settings, data and code hashes): otherwise the unit ids would not name the same text,
so that metric gets no estimate and the verdict "not comparable", and the report says what differs. Training
may differ between experiments by design (that is usually the question): it is listed, not blocking. When
nothing at all is comparable, `collect_comparison` raises instead of writing an empty report.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rlab.errors import RlabError, unknown_name_error
from rlab.paths import ComparisonLayout, ExperimentLayout
from rlab.report import comparability as cmp
from rlab.report import document as doc
from rlab.report import inference as inf
from rlab.report import uncertainty as unc
from rlab.report.arms import Arm, group_arms
from rlab.report.collect import NOT_COMPARABLE, Pairing, assemble
from rlab.report.headline import family_tag, multiplicity_note
from rlab.report.inference import Verdict
from rlab.report.report_data import ReportData
from rlab.report.sources import ExperimentSources, read_experiment, spec_variant_names
from rlab.report.table_model import Table
from rlab.report.tables import mde_text, section, verdict_of, verdict_text

METRIC_NAMES = {
    "extension_bpb": "BPB extension (beyond − at the training length)",
    "primary_bpb": "primary BPB",
    "train_bpb": "train BPB",
    "val_bpb": "val BPB",
    "core": "CORE",
    "passkey_overall": "passkey",
}


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
    """How compared arms of different experiments were trained differently (informational)."""


def metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, f"BPB@{metric[8:]}" if metric.startswith("bpb_len_") else metric)


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
        variants += [f"{lay.experiment}/{v}" for v in spec_variant_names(src.spec)]
    return ExperimentSources(
        experiment=" vs ".join(names), layout=layouts[0], tags=tags, spec={"variants": variants}, notes=notes
    )


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
        training_notes=_training_notes(chosen, refs, separate, sources),
    )


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


# ---------------------------------------------------------------- presentation


def _unit_word(data: ReportData, metric: str) -> str:
    return (
        "examples"
        if metric == "core"
        else "keys"
        if metric.startswith("passkey")
        else ("documents" if data.clustered else "eval units")
    )


def sentence(data: ReportData, row: pd.Series) -> doc.Text:
    """One compared pair on the primary endpoint: both values, the paired difference, the verdict."""
    arm, ref, metric = row["arm"], row["reference"], row["metric"]
    if row["verdict"] == NOT_COMPARABLE:
        return doc.text(
            doc.strong(arm),
            f" vs {ref}: ",
            doc.verdict(Verdict.NOT_COMPARABLE, "no verdict: not comparable"),
            " (evaluated differently; see the warning).",
        )
    if math.isnan(row["diff"]):
        return doc.text(
            doc.strong(arm),
            f" vs {ref}: no paired comparison on the primary endpoint (missing eval outputs).",
        )
    values = data.scalars.set_index(["arm", "metric"])["value"]
    rel = (
        f"{row['rel_pct']:+.2f}% [{row['rel_low']:+.2f}, {row['rel_high']:+.2f}] = "
        if not math.isnan(row["rel_pct"]) and not math.isnan(row["rel_low"])
        else ""
    )
    absolute = f"{row['diff']:+.4f} BPB" + (
        f" [{row['diff_low']:+.4f}, {row['diff_high']:+.4f}]" if not math.isnan(row["diff_low"]) else ""
    )
    word = Verdict(row["verdict"])
    n = "?" if pd.isna(row["n_units"]) else int(row["n_units"])
    mde = mde_text(row)
    call = (
        doc.text(doc.verdict(word, f"no verdict: {word.label(n if isinstance(n, int) else None)}"))
        if word in (Verdict.TOO_FEW_UNITS, Verdict.UNTESTABLE)
        else doc.text(
            doc.verdict(word, "within noise"),
            " (not significant" + (f"; {mde} at 80% power" if mde else "") + ")",
        )
        if word is Verdict.WITHIN_NOISE
        else doc.text(doc.verdict(word), f" than {ref}")
    )
    seeds = data.arm(arm).n_seeds
    return doc.text(
        doc.strong(arm),
        f" vs {ref}: {values[(arm, metric)]:.4f} vs {values[(ref, metric)]:.4f} BPB, {rel}{absolute}; ",
        call,
        f" (n = {n} {_unit_word(data, metric)}, {seeds} seed{'s' if seeds != 1 else ''}; "
        f"{family_tag(data, row)}).",
    )


def answer_items(comp: Comparison) -> list[doc.Item]:
    data = comp.data
    c = data.comparisons
    primary = c[c["metric"] == data.primary.metric]
    items = [doc.Item(sentence(data, r)) for _, r in primary.iterrows() if r["kind"] == "continued"]
    if not items:
        items = [
            doc.Item(
                doc.text(
                    f"No compared pair has the primary endpoint ({data.primary.description}) on both sides."
                )
            )
        ]
    if data.mismatches:
        items.append(
            doc.Item(
                doc.prose(
                    "Warning: not comparable, so no estimate or verdict where these apply: "
                    + "; ".join(dict.fromkeys(m.sentence() for m in data.mismatches))
                    + "."
                ),
                "warning",
            )
        )
    single = [a.key for a in data.arms if a.kind == "continued" and a.n_seeds == 1]
    if single:
        items.append(
            doc.Item(
                doc.text(
                    "Warning: one training seed per arm: the intervals cover evaluation noise only, not "
                    "seed-to-seed training noise."
                ),
                "warning",
            )
        )
    items += [doc.Item(doc.prose(f"Note: {n}"), "note") for n in comp.training_notes]
    return items


def answer_lines(comp: Comparison) -> list[str]:
    """`answer_items` as markdown lines."""
    return [doc.md_text(i.text) for i in answer_items(comp)]


def _cell(metric: str, r: pd.Series) -> str:
    if r["verdict"] == NOT_COMPARABLE:
        return str(NOT_COMPARABLE)
    if math.isnan(r["diff"]):
        return ""
    if metric == "core" or metric.startswith("passkey"):
        text = f"{r['diff']:+.4f}" + (
            f" [{r['diff_low']:+.4f}, {r['diff_high']:+.4f}]" if not math.isnan(r["diff_low"]) else ""
        )
    elif not math.isnan(r["rel_pct"]) and not math.isnan(r["rel_low"]):
        text = f"{r['rel_pct']:+.2f}% [{r['rel_low']:+.2f}, {r['rel_high']:+.2f}]"
    else:
        text = f"{r['diff']:+.4f}"
    word = verdict_text(r, short=True)
    return text + (f" ({word})" if word else "")


def _metric_order(metrics) -> list[str]:
    rank = {
        "extension_bpb": 0,
        "primary_bpb": 0,
        "val_bpb": 1,
        "train_bpb": 2,
        "core": 9,
        "passkey_overall": 10,
    }
    return sorted(set(metrics), key=lambda m: (rank.get(m, 3), int(m[8:]) if m.startswith("bpb_len_") else 0))


def differences_table(comp: Comparison) -> Table:
    """Rows: metrics; columns: compared pairs (`B/yarn − A/yarn`)."""
    c = comp.data.comparisons
    pairs = list(dict.fromkeys(zip(c["arm"], c["reference"], strict=True)))
    heads = {p: f"{p[0]} − {p[1]}" for p in pairs}
    rows: list[dict[str, str]] = []
    verdicts: dict[tuple[int, str], Verdict] = {}
    for m in _metric_order(c["metric"]):
        row = {"metric": metric_name(m)}
        for p in pairs:
            hit = c[(c["arm"] == p[0]) & (c["reference"] == p[1]) & (c["metric"] == m)]
            row[heads[p]] = _cell(m, hit.iloc[0]) if len(hit) else ""
            if len(hit) and row[heads[p]] and (v := verdict_of(hit.iloc[0])) is not None:
                verdicts[(len(rows), heads[p])] = v
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["metric", *heads.values()])
    return Table(
        "Paired differences (arm minus reference)",
        frame,
        caption=(
            "BPB: relative change in % (neg=better); CORE and passkey: absolute difference (pos=better). 95% intervals "
            "paired on the same documents / examples; verdicts Holm-adjusted within their family (primary endpoint: "
            "one family; the rest: another; MDE at 80% power beside every ≈). 'not comparable': the two were "
            "evaluated differently, so no paired estimate exists."
        ),
        about="Each column compares two arms on the units both scored. "
        + (
            f"Each arm is compared with the same arm of `{comp.experiments[0]}`."
            if comp.by_arm
            else f"Every arm is compared with `{comp.data.baseline}`."
        ),
        verdicts=verdicts,
    )


def estimates_table(comp: Comparison) -> Table:
    """Rows: metrics; columns: arms (each on its own data)."""
    s = comp.data.scalars
    arms = [a.key for a in comp.data.arms]
    rows = []
    for m in _metric_order(s["metric"]):
        row = {"metric": metric_name(m)}
        for arm in arms:
            hit = s[(s["arm"] == arm) & (s["metric"] == m)]
            if hit.empty or math.isnan(hit.iloc[0]["value"]):
                row[arm] = ""
                continue
            r = hit.iloc[0]
            half = "" if math.isnan(r["ci_low"]) else f" ± {(r['ci_high'] - r['ci_low']) / 2:.4f}"
            n = "" if pd.isna(r["n_units"]) else f" (n={int(r['n_units'])})"
            row[arm] = f"{r['value']:.4f}{half}{n}"
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["metric", *arms])
    return Table(
        "Estimates per arm (unpaired)",
        frame,
        caption=(
            "estimate ± half-width of its own 95% interval (n = independent units). Unpaired: two arms' intervals "
            "overlapping or not is not a test; the paired differences above are."
        ),
        about="Each arm on its own eval data; arms of different experiments may have been scored on different "
        "documents or settings (see the warnings).",
    )


def experiments_table(comp: Comparison) -> Table:
    meta = comp.data.meta
    rows = []
    for name in comp.experiments:
        part = meta[meta["experiment"] == name]
        seqs = sorted(set(part["train_seq_len"].dropna().astype(int)))
        steps = sorted(set(part[part["kind"] == "continued"]["step"].dropna().astype(int)))
        local = [k.removeprefix(f"{name}/") for k in part["arm"]]
        rows.append(
            {
                "experiment": name,
                "arms": ", ".join(dict.fromkeys(local)),
                "tags evaluated": str(len(part)),
                "training length": ", ".join(map(str, seqs)),
                "steps": ", ".join(map(str, steps)),
            }
        )
    return Table("Experiments compared", pd.DataFrame(rows), about="Arms are labelled `<experiment>/<arm>`.")


def tables(comp: Comparison) -> list[Table]:
    return [
        t
        for t in (experiments_table(comp), differences_table(comp), estimates_table(comp))
        if not t.frame.empty
    ]


def method(comp: Comparison, seed: int, draws: int) -> str:
    return (
        f"Paired comparisons over independent units (BPB by documents, CORE by examples stratified by task, "
        f"passkey by keys): studentized (t) 95% intervals; p-values from sign-flip permutation tests (exact up to "
        f"{inf.EXACT_SIGN_FLIP_MAX} units, else {draws} draws, seed {seed}), or from the t test over training seeds "
        f"(S - 1 degrees of freedom) when arms have several. Primary endpoint: "
        f"{comp.data.primary.description} (the training length of `{comp.primary_from}`). "
        + multiplicity_note(comp.data)
    )


def plot_differences(comp: Comparison, path: Path) -> Path | None:
    """Paired BPB difference by context length, one line per compared pair, 95% interval shaded."""
    from rlab.report.plots import _pyplot, _save

    c = comp.data.comparisons
    rows = c[c["metric"].str.startswith("bpb_len_") & c["diff"].notna()].copy()
    if rows.empty:
        return None
    rows["length"] = rows["metric"].str.removeprefix("bpb_len_").astype(int)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.4, 4.4))
    ax.axhline(0.0, color="black", linewidth=1.3)
    for (arm, ref), part in rows.groupby(["arm", "reference"], sort=False):
        part = part.sort_values("length")
        (line,) = ax.plot(
            part["length"], part["diff"], marker="o", markersize=4, linewidth=1.5, label=f"{arm} − {ref}"
        )
        ax.fill_between(
            part["length"],
            part["diff_low"],
            part["diff_high"],
            color=line.get_color(),
            alpha=0.18,
            linewidth=0,
        )
    lengths = sorted(set(rows["length"]))
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(L) for L in lengths], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("BPB difference (< 0: arm better)")
    ax.grid(alpha=0.3)
    ax.set_title(f"Paired BPB difference by context length — {comp.data.experiment}", fontsize=11)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8.5, frameon=False)
    fig.tight_layout()
    return _save(fig, path)


def comparison_document(
    comp: Comparison, tabs: list[Table], plot: Path | None, seed: int, draws: int
) -> doc.Document:
    """The comparison as one document (rendered to comparison.md and comparison.html)."""
    from rlab.report.estimates import families

    data = comp.data
    pairing = (
        doc.text("each arm vs the same arm of ", doc.code(comp.experiments[0]))
        if comp.by_arm
        else doc.text("every arm vs ", doc.code(data.baseline))
    )
    blocks: list[doc.Block] = [
        doc.Paragraph(
            doc.text(doc.strong("Answer"), f" (primary endpoint: {data.primary.description}; ", pairing, "):")
        ),
        doc.Bullets(answer_items(comp), role="answer"),
    ]
    if plot is not None:
        blocks.append(doc.Image(plot, f"plots/{plot.name}", "Paired BPB difference by context length"))
    blocks.append(doc.Paragraph(doc.prose(method(comp, seed, draws))))
    blocks += [section(t) for t in tabs]
    if data.footnotes.items:
        blocks.append(doc.Section("Notes", [doc.Numbered(list(data.footnotes.items))]))
    title = doc.text("Comparison: ")
    for i, e in enumerate(comp.experiments):
        title = doc.text(title, " vs " if i else "", doc.code(e))
    return doc.Document(
        title,
        blocks,
        html_title=f"rlab compare: Comparison: {' vs '.join(comp.experiments)}",
        families=list(families(data.comparisons).values()),
    )


@dataclass
class ComparisonOutput:
    comparison: Comparison
    tables: list[Table]
    items: list[doc.Item]
    """The opening lines: one sentence per compared pair, then warnings and notes."""
    written: list[Path]
    document: doc.Document

    @property
    def answer(self) -> list[str]:
        """The opening lines as markdown (JSON, tests)."""
        return [doc.md_text(i.text) for i in self.items]


def write_comparison(
    layout: ComparisonLayout,
    comp: Comparison,
    *,
    fmt: str = "md",
    seed: int = 0,
    draws: int = unc.DEFAULT_DRAWS,
) -> ComparisonOutput:
    """comparison.md (and .html with fmt 'html') and the difference plot into the comparison's own folder."""
    from rlab.atomic_io import write_text_atomic
    from rlab.report.results_csv import lock_for

    tabs = tables(comp)
    plot_path = layout.plots_dir / "bpb_difference_vs_length.png"
    plot = plot_differences(comp, plot_path)
    if plot is None:
        plot_path.unlink(missing_ok=True)
    written = [plot] if plot is not None else []
    document = comparison_document(comp, tabs, plot, seed, draws)
    with lock_for(layout.comparison_md):
        write_text_atomic(layout.comparison_md, doc.to_markdown(document))
        written.append(layout.comparison_md)
        if fmt == "html":
            write_text_atomic(layout.comparison_html, doc.to_html(document))
            written.append(layout.comparison_html)
    return ComparisonOutput(comp, tabs, answer_items(comp), written, document)
