"""The report's first lines: one sentence per variant on the primary endpoint, then what limits them.

The same sentences open comparison.md, comparison.html and the terminal output: each a `document.Text` whose
verdict is a span carrying its `Verdict` (markdown prints it bold; HTML and the terminal colour it by the enum).
"""

from __future__ import annotations

import math

from rlab.report.assemble.report_data import ReportData
from rlab.report.render import document as doc
from rlab.report.render.arm_values import comparison, mde_text, scalar
from rlab.report.render.table_model import arm_order
from rlab.report.sources import arms as arms_mod
from rlab.report.sources import numerics
from rlab.report.stats import estimates as est
from rlab.report.stats import inference as inf
from rlab.report.stats.verdicts import Verdict

MORE_UNITS_HINT = {
    "bpb": "score more documents: raise eval.bpb_tokens (val/train BPB) or eval.length_tokens (BPB vs length), "
    "or add long documents with `rlab data long-docs`",
    "core": "raise eval.max_per_task (more CORE examples)",
    "passkey": "raise eval.passkey_trials (more independent keys per cell)",
}


def _hint(metric: str) -> str:
    if metric == "core":
        return MORE_UNITS_HINT["core"]
    if metric.startswith("passkey"):
        return MORE_UNITS_HINT["passkey"]
    return MORE_UNITS_HINT["bpb"]


def unit_word(data: ReportData, metric: str) -> str:
    """What a comparison's units are called in a sentence."""
    if metric == "core":
        return "examples"
    if metric.startswith("passkey"):
        return "keys"
    return "documents" if data.clustered else "eval units"


def bpb_change(comp) -> tuple[str, str]:
    """A BPB comparison in words: its relative change with interval ('' without one), its absolute change."""
    rel = (
        f"{comp['rel_pct']:+.2f}% [{comp['rel_low']:+.2f}, {comp['rel_high']:+.2f}]"
        if not math.isnan(comp["rel_pct"]) and not math.isnan(comp["rel_low"])
        else ""
    )
    absolute = f"{comp['diff']:+.4f} BPB" + (
        f" [{comp['diff_low']:+.4f}, {comp['diff_high']:+.4f}]" if not math.isnan(comp["diff_low"]) else ""
    )
    return rel, absolute


def sentence(data: ReportData, arm: str) -> doc.Text:
    """One variant's answer on the primary endpoint: estimate, interval, verdict, units, seeds."""
    metric, b = data.primary.metric, data.baseline
    comp = comparison(data, arm, metric)
    value, _, _, _ = scalar(data, arm, metric)
    base_value, _, _, _ = scalar(data, data.baseline_arm, metric) if data.baseline_arm else (math.nan,) * 4
    if comp is None or data.baseline_arm is None or math.isnan(comp["diff"]):
        return doc.text(
            doc.strong(arm),
            f": no paired comparison with {b} on the primary endpoint (missing eval outputs).",
        )
    n = (
        "?"
        if comp["n_units"] is None or (isinstance(comp["n_units"], float) and math.isnan(comp["n_units"]))
        else int(comp["n_units"])
    )
    seeds, base_seeds = data.arm(arm).n_seeds, data.arm(data.baseline_arm).n_seeds
    seed_text = f"{seeds} seed{'s' if seeds != 1 else ''}" + (
        f" vs {base_seeds}" if base_seeds != seeds else ""
    )
    rel, absolute = bpb_change(comp)
    word = Verdict(comp["verdict"])
    call: doc.Text
    if word is Verdict.NOT_COMPARABLE:
        call = doc.text(
            doc.verdict(word, "no verdict: not comparable"), " (evaluated or trained differently; see above)"
        )
    elif word is Verdict.TOO_FEW_UNITS:
        label = f"no verdict: {word.label(n if isinstance(n, int) else None)}"
        call = doc.text(doc.verdict(word, label), f"; to get more, {_hint(metric)}")
    elif word is Verdict.UNTESTABLE:
        call = doc.text(
            doc.verdict(word, "no verdict: untestable"), " (no variation between the arms on these units)"
        )
    elif word is Verdict.WITHIN_NOISE:
        mde = mde_text(comp)
        call = doc.text(
            doc.verdict(word, "within noise"),
            " (not significant" + (f"; {mde} at 80% power" if mde else "") + ")",
        )
    else:
        call = doc.text(doc.verdict(word), f" than {b}")
    return doc.text(
        doc.strong(arm),
        f" vs {b}: {value:.4f} vs {base_value:.4f} BPB, {rel + ' = ' if rel else ''}{absolute}; ",
        call,
        f" (n = {n} {unit_word(data, metric)}, {seed_text}; {family_tag(data, comp)})",
        *extension_beside_level(data, arm),
        ".",
    )


def short_verdict(comp) -> doc.Span:
    """A secondary verdict in a sentence: the word, with its MDE beside "within noise"."""
    word = Verdict(comp["verdict"])
    if word is Verdict.WITHIN_NOISE:
        mde = mde_text(comp)
        return doc.verdict(word, f"within noise ({mde})" if mde else "within noise")
    return doc.verdict(word, word.label(None))


def extension_beside_level(data: ReportData, arm: str) -> tuple[doc.Part, ...]:
    """The extension beside the level verdict (what the longer context buys), and plainly when an arm "gains more
    from context" only because it predicts worse: a model that barely uses context loses little from more."""
    if not data.primary.extension or data.primary.reference is None:
        return ()
    ext, level = comparison(data, arm, est.EXTENSION), comparison(data, arm, data.primary.metric)
    if ext is None or math.isnan(ext["diff"]):
        return ()
    value, _, _, _ = scalar(data, arm, est.EXTENSION)
    base_value, _, _, _ = scalar(data, data.baseline_arm, est.EXTENSION) if data.baseline_arm else (0,) * 4
    span = f" [{ext['diff_low']:+.4f}, {ext['diff_high']:+.4f}]" if not math.isnan(ext["diff_low"]) else ""
    out: list[doc.Part] = [
        f"; extension from {data.primary.reference} to {' and '.join(map(str, data.primary.extension))} tokens "
        f"{value:+.4f} vs "
        f"{base_value:+.4f} BPB, difference {ext['diff']:+.4f}{span} ",
        short_verdict(ext),
        f" ({family_tag(data, ext)})",
    ]
    if Verdict(ext["verdict"]) is Verdict.BETTER and level is not None and level["diff"] > 0:
        worse = _worse_lengths(data, arm)
        where = "at every length measured" if worse == "all" else f"at {max(data.primary.lengths)} tokens"
        out.append(
            f": it gains more from the longer context only because it predicts worse {where}, not a better "
            "long-context model"
        )
    return tuple(out)


def worse_extenders(data: ReportData) -> list[str]:
    """One plain line per continued arm whose extension beats the baseline's while its primary level is worse: it
    "gains more from context" only because it predicts worse (the Answer says so under its table)."""
    out = []
    for arm in sentences_arms(data):
        ext, level = comparison(data, arm, est.EXTENSION), comparison(data, arm, data.primary.metric)
        if (
            ext is None
            or level is None
            or Verdict(ext["verdict"]) is not Verdict.BETTER
            or not level["diff"] > 0
        ):
            continue
        where = "at every length measured" if _worse_lengths(data, arm) == "all" else "at the target length"
        out.append(
            f"{arm} gains more from the longer context than {data.baseline} (extension {ext['diff']:+.4f} BPB, "
            f"better) only because it predicts worse {where}: on the primary endpoint it is "
            f"{Verdict(level['verdict']).label(None)} ({level['diff']:+.4f} BPB), not a better long-context model."
        )
    return out


def _worse_lengths(data: ReportData, arm: str) -> str:
    """'all' when the arm's BPB is above the baseline's at every measured length, else 'some'."""
    rows = data.comparisons[
        (data.comparisons["arm"] == arm) & data.comparisons["metric"].astype(str).str.startswith("bpb_len_")
    ]
    return "all" if len(rows) and (rows["diff"] > 0).all() else "some"


def family_tag(data: ReportData, comp) -> str:
    """Which family a headline verdict belongs to, with its size."""
    fam = est.families(data.comparisons).get(str(comp["family"]))
    return f"{fam.describe()}" if fam is not None else "in no family"


def sentences(data: ReportData) -> list[doc.Text]:
    """One sentence per continued variant (the baseline excluded), in table order."""
    return [sentence(data, a) for a in sentences_arms(data)]


def mismatch_line(data: ReportData) -> str:
    """The tags compared that were not evaluated or trained alike, and what follows for the verdicts."""
    head = (
        "Verdicts were given across these differences anyway (--allow-mismatch): "
        if data.allow_mismatch
        else "Not comparable, so no better/worse verdict where these apply (re-evaluate with the same "
        "settings and code, or pass --allow-mismatch): "
    )
    return head + "; ".join(m.sentence() for m in data.mismatches) + "."


def warnings(data: ReportData) -> list[str]:
    """What limits the verdicts: comparability, seeds, unit counts, clustering."""
    out = [mismatch_line(data)] if data.mismatches else []
    if data.primary.note:
        out.append(f"Primary endpoint: {data.primary.note}.")
    elif data.primary.capped:
        out.append(
            "Primary endpoint: left out "
            + ", ".join(
                f"{L} tokens ({', '.join(t)} cannot attend to it)" for L, t in data.primary.capped.items()
            )
            + "."
        )
    if data.baseline_arm is None:
        out.append(f"No outputs of the baseline variant '{data.baseline}': nothing is compared.")
    primary = data.comparisons[data.comparisons["family"] == "primary"]
    few = [r for r in primary.itertuples(index=False) if r.verdict == Verdict.TOO_FEW_UNITS]
    if few:
        out.append(
            f"Fewer than {inf.MIN_UNITS} independent units on the primary endpoint: "
            f"{_hint(data.primary.metric)}."
        )
    seeds = seed_warning(data)
    if seeds:
        out.append(seeds)
    # The continued arms have seeds, but the base (and the zero-shot arms on it) may be one model each; with
    # seeded continued arms the Answer's seed line says so (`answer_lines._seed_line`).
    lone = [a for a in data.arms if a.kind != "continued" and a.n_seeds == 1]
    seeded = any(a.kind == "continued" and a.n_seeds > 1 for a in data.arms)
    if lone and not seeds and not seeded:
        every = len(lone) == sum(a.kind != "continued" for a in data.arms)
        who = "The base and the zero-shot arms are" if every else ", ".join(a.key for a in lone) + " are"
        out.append(
            f"{who} one model each (one base): their verdicts cover evaluation noise only, and a rerun that "
            "pretrains another base (another machine, dtype or seed) may change them; replicated bases "
            "(`train.replicate_base`) cover that noise (docs/reproducibility.md)."
        )
    if unpaired := arms_mod.unpaired_bases(_seed_bases(data)):
        out.append(
            f"Replicated bases do not line up across arms ({', '.join(unpaired)}): seed i of these arms continues "
            "another base than seed i of the others, so per-seed differences mix base-to-base noise into the "
            "pairing (re-run them with train.replicate_base on the same bases)."
        )
    if line := numerics.dtype_warning(numerics.by_arm(data.arms, data.sources.tags if data.sources else [])):
        out.append(line)
    if not data.clustered and any(data.comparisons["interval"] == "paired"):
        out.append(
            "BPB units do not name their documents: blocks of one document were resampled as if "
            "independent, so BPB intervals may be too narrow (re-evaluate to get per-document units)."
        )
    return out


def seed_warning(data: ReportData) -> str | None:
    """The warning that continued arms have one training seed (None when every one has several)."""
    single = [a.key for a in data.arms if a.kind == "continued" and a.n_seeds == 1]
    if not single:
        return None
    who = "variant" if len(single) == sum(a.kind == "continued" for a in data.arms) else ", ".join(single)
    return (
        f"One training seed per {who}: the intervals and verdicts cover evaluation noise only, not "
        f"seed-to-seed training noise; a verdict that covers it needs >= {inf.MIN_SEEDS} seeds per arm "
        "(`rlab continue --seeds S`), and with S seeds the seed term has S - 1 degrees of freedom (t = 4.3 at "
        "3 seeds, 2.8 at 5), so a few seeds buy coverage of training noise, not power."
    )


def _seed_bases(data: ReportData) -> dict[str, list[str | None]]:
    return arms_mod.seed_bases(data.arms, data.sources.tags) if data.sources is not None else {}


def bases_note(data: ReportData) -> str:
    """With replicated bases, what the seed covers; '' when every arm continues one base."""
    bases = _seed_bases(data)
    if not bases:
        return ""
    first = max(bases.values(), key=len)
    return (
        f"Replicated bases: seed i of every arm continues base i ({', '.join(str(b) for b in first)}), so the "
        "seed term covers pretraining and continuation noise, and each per-seed difference pairs two arms on "
        "one base."
    )


def _direction(comp) -> int:
    """+1 better, -1 worse, 0 within noise or no verdict (for any metric's sign convention)."""
    return {Verdict.BETTER: 1, Verdict.WORSE: -1}.get(Verdict(comp["verdict"]), 0) if comp is not None else 0


def disagreements(data: ReportData) -> list[str]:
    """When val BPB and the primary endpoint (BPB at length) point different ways for a variant, what each
    measures, so the reader knows which question each answers."""
    if data.primary.metric == "val_bpb":
        return []
    # an extension is a difference of two lengths: its level counterpart is BPB at the longest of them
    at_length = (
        f"bpb_len_{max(data.primary.lengths)}"
        if data.primary.metric == est.EXTENSION
        else data.primary.metric
    )
    names = []
    for arm in sentences_arms(data):
        val, prim = comparison(data, arm, "val_bpb"), comparison(data, arm, at_length)
        if val is None or prim is None or math.isnan(val["diff"]) or math.isnan(prim["diff"]):
            continue
        dv, dp = _direction(val), _direction(prim)
        if dv * dp < 0 or (dv != dp and (val["diff"] > 0) != (prim["diff"] > 0)):
            names.append(f"{arm} (val BPB {val['diff']:+.4f}, BPB at length {prim['diff']:+.4f})")
    if not names:
        return []
    return [
        f"val BPB and BPB at length point different ways for {', '.join(names)}. They measure different "
        f"things: val BPB scores the val split's documents in windows of the eval's sequence length, so "
        f"most targets see short context (general text prediction); BPB at length scores the same targets "
        f"of long documents, each predicted from about L tokens of context (what longer context buys). A "
        f"RoPE change can cost a little at short context while using long context better; the primary "
        f"endpoint is about the second."
    ]


def sentences_arms(data: ReportData) -> list[str]:
    """The arms that get a headline sentence: continued variants other than the baseline."""
    return [a for a in arm_order(data) if a != data.baseline_arm and data.arm(a).kind == "continued"]


def multiplicity_note(data: ReportData) -> str:
    """The families of the table verdicts, their sizes and error rates, and what never enters one."""
    fams = est.families(data.comparisons)
    primary, secondary = fams.get("primary"), fams.get("secondary")
    return (
        f"Primary endpoint: {data.primary.description}, each continued variant vs `{data.baseline}`: the "
        f"{primary.describe() if primary else 'primary family: 0 comparisons'}. Every other comparison in the "
        f"tables below is in the {secondary.describe() if secondary else 'secondary family: 0 comparisons'}. "
        f"Comparisons with fewer than {inf.MIN_UNITS} independent units, with no variation between the arms, or "
        f"not comparable enter no family and get no verdict. Intervals shown are unadjusted 95% intervals; "
        f'every "within noise" gives its MDE, the smallest difference its test would find with 80% power at '
        f"its family's alpha / m."
    )
