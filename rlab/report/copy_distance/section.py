"""The copy-by-distance section of a report: does each arm still use a passage seen `d` tokens back?

Reads every tag's ``copy_distance.csv`` (rlab.evals.copy_distance.task: one row per record and window)
and gives, per arm and distance, the loss on the repeated passage (`copy`), on the same passage in
the control window whose earlier passage is another one (`control`) and the gain between them, with
studentized 95% intervals over records (the same records for every tag, so differences of gain between arms are
paired by record; several seeds of an arm are the replicates of training noise, `rlab.report.stats.inference`). The
paired differences with the baseline variant in the same condition are the **copy family**: Holm over its
testable comparisons (at least `MIN_UNITS` records, some variation), familywise 5%, each p from the skew-corrected sign-flip test
over records (one seed) or the t test over seeds; "within noise" carries its MDE at 80% power. Beside each
level, each arm's retention of the copy beyond L0 (its gain there over its own gain within L0, per nested record:
`rlab.report.copy_distance.retention`) is compared with the reference's in the same family (`analyse`). The report's
opening repeats them, and results.csv carries them (`wide_columns`). (The primary endpoint is BPB; this section
is what makes long-range use visible on a tiny model.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pandas as pd

from rlab.evals.copy_distance.task import USEFUL_GAIN  # torch-free at import
from rlab.report.copy_distance import retention
from rlab.report.copy_distance.layout import arm_window_rows, each_variant
from rlab.report.copy_distance.plot import plot
from rlab.report.copy_distance.records import by_seed, nested_arms, records, section_lengths
from rlab.report.render import document as doc
from rlab.report.render import methods as mth
from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd
from rlab.report.stats.verdicts import Verdict

if TYPE_CHECKING:
    from rlab.report.assemble.measured import Measured
    from rlab.report.assemble.report_data import ReportData

COPY_PLOT = "copy_distance.png"
FAMILY = "copy"
"""The name of the section's family of verdicts."""


@dataclass
class CopySection:
    cells: pd.DataFrame
    """arm, kind, variant, window, distance, copy, control, gain(_low/_high), acc, n, n_seeds, ref, diff(_low/_high),
    p_value, p_holm, verdict, mde, diff_n (records both sides had), unit_var and seed_var (the terms of the
    difference's se²)."""
    sentences: list[doc.Text]
    table: doc.TableBlock
    plot: Path | None = None
    caveat: str | None = None
    """Set when the base does not use context within its training length (see `base_caveat`)."""
    answer: list[doc.Text] = field(default_factory=list)
    """The verdicts at a glance, for the report's opening (see `answer_lines`)."""
    retention: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Per arm and distance beyond L0: retention of the copy and its verdict (`rlab.report.copy_distance.retention`)."""


def _reference_arm(arms: set[str], kind: str, variant: str, baseline: str) -> str | None:
    """The arm an arm is compared with: the baseline variant in the same condition."""
    if variant == baseline or kind == "base":
        return None
    ref = baseline if kind == "continued" else f"{baseline} ({kind})"
    return ref if ref in arms else None


def analyse(
    data: Measured, seed: int = 0, draws: int = inf.SIGN_FLIP_DRAWS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The section's two estimands, decided in one copy family: per arm and window the level (gain) and its paired
    difference with the reference arm; per arm and window beyond L0 the retention and its paired difference."""
    recs = records(data)
    if recs.empty:
        return recs, pd.DataFrame(columns=retention.COLUMNS)
    arms = set(recs["arm"])
    rows, tests = [], []
    groups = cast(
        list[tuple[tuple[str, str, str, int, int], pd.DataFrame]],
        list(recs.groupby(["arm", "kind", "variant", "window", "distance"], sort=False)),
    )
    for (arm, kind, variant, window, distance), g in groups:
        gains = by_seed(g)
        level = inf.level(gains.to_numpy().T)
        row = {
            "arm": arm,
            "kind": kind,
            "variant": variant,
            "window": int(window),
            "distance": int(distance),
            "copy": g["copy_nats"].mean(),
            "control": g["control_nats"].mean(),
            "gain": level.estimate if level else math.nan,
            "gain_low": level.low if level else math.nan,
            "gain_high": level.high if level else math.nan,
            "acc": g["copy_acc"].mean(),
            "n": len(gains),
            "n_seeds": gains.shape[1],
            "ref": None,
        }
        ref = _reference_arm(arms, kind, variant, data.baseline)
        test = None
        if ref is not None:
            ref_gains = by_seed(recs[(recs["arm"] == ref) & (recs["window"] == window)])
            mine, theirs = gains.align(ref_gains, join="inner", axis=0)
            if len(mine):
                row["ref"] = ref
                test = inf.compare(
                    mine.to_numpy().T,
                    theirs.to_numpy().T,
                    rng=inf.rng_for(seed, f"copy/{arm}-vs-{ref}/{window}"),
                    draws=draws,
                )
        rows.append(row)
        tests.append(test)

    def gains_of(arm: str, window: int) -> pd.DataFrame:
        return by_seed(recs[(recs["arm"] == arm) & (recs["window"] == window)])

    planned = retention.plan(
        recs,
        gains_of,
        nested_arms(data),
        section_lengths(data)[0],
        lambda kind, variant: _reference_arm(arms, kind, variant, data.baseline),
        {a: data.arm_caps(a) for a in arms},
    )
    kept_rows, kept_tests = retention.estimate(recs, gains_of, planned, seed, draws)
    family, adjusted, verdicts = vd.decide_family(
        FAMILY, tests + kept_tests, [False] * (len(tests) + len(kept_tests))
    )
    kept = retention.fill(kept_rows, kept_tests, adjusted[len(tests) :], verdicts[len(tests) :], family)
    adjusted, verdicts = adjusted[: len(tests)], verdicts[: len(tests)]
    for row, test, p, v in zip(rows, tests, adjusted, verdicts, strict=True):
        row.update(
            diff=test.estimate if test else math.nan,
            diff_low=test.low if test else math.nan,
            diff_high=test.high if test else math.nan,
            diff_n=test.n_units if test else pd.NA,
            unit_var=test.unit_var if test else math.nan,  # the noise `rlab power` plans from
            seed_var=test.seed_var if test else math.nan,
            p_value=math.nan if test is None or test.p_value is None else test.p_value,
            p_holm=math.nan if p is None else p,
            verdict=v,
            mde=test.mde(family.mde_alpha) if test is not None and p is not None else math.nan,
            seed_limited=test is not None and p is not None and test.seed_limited(family.mde_alpha),
        )
    out = pd.DataFrame(rows)
    out.attrs["family"] = family
    kept.attrs["family"] = family
    return out, kept


def family(c: pd.DataFrame) -> vd.Family:
    """The copy family (its size counts testable comparisons only; set by `analyse`)."""
    return c.attrs.get("family", vd.Family(FAMILY, 0))


def _verdict(row) -> doc.Span | None:
    """The verdict as the section prints it (None where there is no comparison)."""
    v = Verdict(row["verdict"]) if "verdict" in row and isinstance(row["verdict"], str) else Verdict.NONE
    if v is Verdict.WITHIN_NOISE:
        return doc.verdict(v, vd.within_noise(float(row["mde"]), vd.row_seed_limited(row)))
    n = None if pd.isna(row.get("diff_n", pd.NA)) else int(row["diff_n"])
    return doc.verdict(v, v.label(n)) if v is not Verdict.NONE else None


def sentences(c: pd.DataFrame, base_len: int | None, train_len: int | None) -> list[doc.Text]:
    """Verdict-style lines: the base within its training length, then each arm at the longest distance."""
    out = []
    base = c[c["kind"] == "base"]
    if base_len and not base.empty:
        inside = base[base["window"] <= base_len]
        if not inside.empty:
            r = inside.loc[inside["window"].idxmax()]
            out.append(
                doc.text(
                    doc.strong("base"),
                    f" (trained at {base_len}) at distance {r['distance']}: copy loss {r['copy']:.2f} vs "
                    f"{r['control']:.2f} nats/token in the control, gain {r['gain']:+.2f} "
                    f"[{r['gain_low']:+.2f}, {r['gain_high']:+.2f}] (n={r['n']} records; copy accuracy "
                    f"{r['acc']:.0%})",
                )
            )
    for kind in ("zero-shot", "continued"):
        sub = c[c["kind"] == kind]
        if sub.empty:
            continue
        for window in sorted(set(sub["window"])):
            if train_len and kind == "continued" and window < train_len:
                continue
            if base_len and kind == "zero-shot" and window <= base_len:
                continue
            at = sub[sub["window"] == window]
            parts: list[doc.Part] = [
                f"{kind} arms at distance {at['distance'].iloc[0]} (window {window}): gain "
            ]
            for i, (_, r) in enumerate(at.iterrows()):
                v = _verdict(r)
                parts.append(("; " if i else "") + f"{r['variant']} {r['gain']:+.2f}")
                if v is not None:
                    parts += [
                        f", vs {r['ref']} {r['diff']:+.2f} [{r['diff_low']:+.2f}, {r['diff_high']:+.2f}] ",
                        v,
                    ]
            out.append(doc.text(*parts))
    return out


def answer_lines(c: pd.DataFrame, base_len: int | None, train_len: int | None) -> list[doc.Text]:
    """The section's verdicts at a glance, for the report's opening: the base's gain within L0, then each
    condition's paired differences at the first distance that tests it (zero-shot: the first window past
    L0; continued: the training length), best first."""
    out = []
    base = c[(c["kind"] == "base") & (c["window"] <= (base_len or 0))]
    if not base.empty:
        r = base.loc[base["window"].idxmax()]
        if r["gain_low"] >= USEFUL_GAIN:
            out.append(
                doc.text(
                    f"Long-range use: the base predicts a passage it saw {r['distance']} tokens back (within its "
                    f"training length {base_len}) {r['gain']:+.2f} nats/token better than an unseen one "
                    f"[{r['gain_low']:+.2f}, {r['gain_high']:+.2f}], copy accuracy {r['acc']:.0%}."
                )
            )
    tests = (
        ("zero-shot", lambda w: base_len is not None and w > base_len, "past L0"),
        ("continued", lambda w: train_len is not None and w >= train_len, "at the training length"),
    )
    for kind, tests_it, where in tests:
        sub = c[(c["kind"] == kind) & c["diff"].notna()]
        windows = sorted(w for w in set(sub["window"]) if tests_it(w))
        if not windows:
            continue
        at = sub[sub["window"] == windows[0]].sort_values("diff", ascending=False)
        parts: list[doc.Part] = [
            f"Long-range use, {kind} arms {where} (distance {at['distance'].iloc[0]}, window {windows[0]}): "
            f"gain in nats/token vs {at['ref'].iloc[0]}: "
        ]
        parts += each_variant(
            at,
            lambda r: f"{r['variant']} {r['diff']:+.2f} [{r['diff_low']:+.2f}, {r['diff_high']:+.2f}] ",
            _verdict,
        )
        parts.append(f" ({family(c).describe()}).")
        out.append(doc.text(*parts))
    return out


def base_caveat(c: pd.DataFrame, base_len: int | None) -> str | None:
    """What limits every verdict when the base hardly uses a passage seen within its training length.

    A model that saves less than `USEFUL_GAIN` nats/token (95% lower bound) on a repeat `d <= L0`
    tokens back makes no real use of long context, so no RoPE variant can be seen extending that use:
    differences between variants at long context then come from how each one changes attention to
    nearby tokens, and stay small. The report says so up front rather than leave the verdicts to be
    read as evidence about context extension.
    """
    base = c[(c["kind"] == "base") & (c["window"] <= (base_len or 0))]
    if base.empty:
        return None
    r = base.loc[base["window"].idxmax()]
    if r["gain_low"] >= USEFUL_GAIN:
        return None
    return (
        f"The base makes little or no use of context within its training length ({base_len} tokens): a "
        f"passage repeated {r['distance']} tokens back costs {r['copy']:.2f} nats/token vs {r['control']:.2f} "
        f"when it was not seen (gain {r['gain']:+.2f} [{r['gain_low']:+.2f}, {r['gain_high']:+.2f}], n={r['n']} "
        f"records; a model that copies saves at least {USEFUL_GAIN:g}). With no long-range use to extend, the "
        "differences between variants below measure how each one perturbs attention to nearby tokens, not "
        "context extension; expect them to be small."
    )


def table(c: pd.DataFrame, caps: dict[str, dict[int, int]] | None = None) -> doc.TableBlock:
    """Rows: arms; columns: distance (window); cells: copy loss, gain ± half-width, copy accuracy, and where the
    arm's attention windows cap the context at that window (`caps`: arm -> window -> reach), the reach."""
    windows = sorted(set(c["window"]))
    columns = ["arm", *(f"d={c[c['window'] == w]['distance'].iloc[0]} (W={w})" for w in windows)]

    def cell(r: pd.Series) -> doc.Cell:
        h = (r["gain_high"] - r["gain_low"]) / 2
        cap = (caps or {}).get(r["arm"], {}).get(r["window"])
        capped = f", capped at {cap}" if cap is not None else ""
        return doc.Cell(f"{r['copy']:.2f} (gain {r['gain']:+.2f} ± {h:.2f}, acc {r['acc']:.0%}{capped})")

    rows = arm_window_rows(c, windows, cell)
    control = c.groupby("window")["control"].mean()
    rows.append(
        [doc.Cell("control (mean over arms)", em=True), *(doc.Cell(f"{control[w]:.2f}") for w in windows)]
    )
    return doc.TableBlock(columns, rows, align="plain")


def build(data: ReportData, plots_dir: Path) -> CopySection | None:
    """The section, or None when no tag has copy-distance results (cells from `ReportData.copy_cells` and
    `copy_retention`, decided in `collect`)."""
    c, kept = data.copy_cells, data.copy_retention
    if c is None or c.empty:
        return None
    kept = kept if kept is not None else pd.DataFrame(columns=retention.COLUMNS)
    base_len, train_len = section_lengths(data)
    caps = {a: data.arm_caps(a) for a in set(c["arm"])}
    return CopySection(
        c,
        sentences(c, base_len, train_len) + retention.sentences(kept),
        table(c, caps),
        plot(c, plots_dir / COPY_PLOT, base_len, train_len, kept),
        base_caveat(c, base_len),
        answer_lines(c, base_len, train_len) + retention.answer_lines(kept, train_len, family(c)),
        kept,
    )


def section(copy: CopySection) -> doc.Section:
    """The section as a document section: what it measures, the verdict lines, the plot, the table."""
    about = doc.prose(
        "Each record repeats a 32-token passage of held-out natural text `d` tokens after its first "
        "occurrence, at the end of a window of W tokens; its control is the same window with another passage "
        "in place of the first occurrence (rlab.evals.copy_distance.task). Cells: mean loss on the repeat "
        "(nats/token), the gain over the control (what seeing the passage earlier saves) with its "
        f"{mth.INTERVAL} over records, and the greedy copy accuracy. Comparisons are paired differences of gain "
        "(same records; + = the arm uses the earlier passage more) vs the baseline variant in the same "
        f"condition; their verdicts form the copy family ({mth.TITLE}); MDEs are in nats/token."
    )
    blocks: list[doc.Block] = [doc.Paragraph(about), doc.Bullets([doc.Item(t) for t in copy.sentences])]
    if copy.plot is not None:
        blocks.append(doc.Image(copy.plot, f"plots/{COPY_PLOT}", "Copy loss by distance"))
    blocks.append(copy.table)
    blocks += retention.blocks(copy.retention)
    return doc.Section("Long-range use: copy loss by distance", blocks)
