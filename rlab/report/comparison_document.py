"""What a comparison of several experiments says, and where it is written: comparison.md / .html and a plot.

One sentence per compared pair on the primary endpoint, the tables of differences and estimates, the method
paragraph and the paired-difference plot, as one `rlab.report.render.document` (the same model the report renders
through); the numbers are those `rlab.report.assemble.compare.collect_comparison` collected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rlab.paths import ComparisonLayout
from rlab.report.assemble.compare import Comparison
from rlab.report.assemble.pairing import NOT_COMPARABLE
from rlab.report.assemble.report_data import ReportData
from rlab.report.build import write_document
from rlab.report.render import document as doc
from rlab.report.render import markdown as md
from rlab.report.render.arm_values import mde_text, verdict_of, verdict_text
from rlab.report.render.headline import bpb_change, family_tag, multiplicity_note, unit_word
from rlab.report.render.table_model import Table
from rlab.report.render.tables import section
from rlab.report.stats import inference as inf
from rlab.report.stats import uncertainty as unc
from rlab.report.stats.estimates import families
from rlab.report.stats.verdicts import Verdict

METRIC_NAMES = {
    "extension_bpb": "BPB extension (beyond − at the training length)",
    "primary_bpb": "primary BPB",
    "train_bpb": "train BPB",
    "val_bpb": "val BPB",
    "core": "CORE",
    "passkey_overall": "passkey",
}


def metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, f"BPB@{metric[8:]}" if metric.startswith("bpb_len_") else metric)


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
    rel, absolute = bpb_change(row)
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
        f" vs {ref}: {values[(arm, metric)]:.4f} vs {values[(ref, metric)]:.4f} BPB, {rel + ' = ' if rel else ''}{absolute}; ",
        call,
        f" (n = {n} {unit_word(data, metric)}, {seeds} seed{'s' if seeds != 1 else ''}; "
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
    return [md.md_text(i.text) for i in answer_items(comp)]


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
        f"passkey by keys): each comparison's {inf.test_description(draws, seed)}. Primary endpoint: "
        f"{comp.data.primary.description} (the training length of `{comp.primary_from}`). "
        + multiplicity_note(comp.data)
    )


def plot_differences(comp: Comparison, path: Path) -> Path | None:
    """Paired BPB difference by context length, one line per compared pair, 95% interval shaded."""
    from rlab.report.render.plots import _pyplot, _save  # noqa: PLC0415 - defers matplotlib

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
        return [md.md_text(i.text) for i in self.items]


def write_comparison(
    layout: ComparisonLayout,
    comp: Comparison,
    *,
    fmt: str = "md",
    seed: int = 0,
    draws: int = unc.DEFAULT_DRAWS,
) -> ComparisonOutput:
    """comparison.md (and .html with fmt 'html') and the difference plot into the comparison's own folder."""
    tabs = tables(comp)
    plot_path = layout.plots_dir / "bpb_difference_vs_length.png"
    plot = plot_differences(comp, plot_path)
    if plot is None:
        plot_path.unlink(missing_ok=True)
    written = [plot] if plot is not None else []
    document = comparison_document(comp, tabs, plot, seed, draws)
    written += write_document(document, layout.comparison_md, layout.comparison_html, html_too=fmt == "html")
    return ComparisonOutput(comp, tabs, answer_items(comp), written, document)
