"""Retention of the copy: how much of its own gain within L0 an arm keeps beyond L0, with its own verdict.

A gain at one distance compares *levels* of copying: an arm that already copies better within L0 (YaRN
and NTK zero-shot do, by changing attention to nearby tokens) looks better beyond L0 without extending
anything. Context extension is about what happens past L0 *relative to the same arm within it*, so each
arm also gets its retention at every distance d beyond L0:

    retention(d) = mean over records of gain(d) / mean over records of gain(d_in)

where d_in is the longest distance within L0 (the window W <= L0). Copy records are nested across
windows (`rlab.evals.copy_distance.task`: the same passage, control and filler, only the gap varies), so
both gains come from the same records and the ratio is estimated per record: for each training seed,
per-record values `psi_i = R + (b_i - R * w_i) / mean(w)` (the delta method's influence values) average
to that seed's ratio R, so the studentized interval and test of `rlab.report.stats.inference` apply to them
as to any per-unit value (`inference.level` for the arm, `inference.compare` for the difference from the
reference arm, paired by record, seeds as the replicate). The test is the sign-flip test on the
per-record differences of psi: exact for their mean, approximate (first order) for the ratio.

A retention is only defined where there is a copy to retain: an arm (or its reference) whose gain
within L0 has a 95% lower bound below `USEFUL_GAIN` gets no retention verdict ("no copy within L0"),
nor do records that are not nested (files of older rlab versions) or an arm whose attention windows
cannot reach the first copy. The verdicts join the copy section's family with the level comparisons
(`rlab.report.copy_distance.section.analyse` decides both in one Holm family).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlab.evals.copy_distance.task import USEFUL_GAIN  # torch-free at import
from rlab.report.copy_distance.layout import arm_window_rows, each_variant
from rlab.report.render import document as doc
from rlab.report.render import methods as mth
from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd
from rlab.report.stats.verdicts import Verdict

COLUMNS = [
    "arm",
    "kind",
    "variant",
    "window",
    "distance",
    "within_distance",
    "within_gain",
    "gain",
    "retention",
    "retention_low",
    "retention_high",
    "n",
    "n_seeds",
    "ref",
    "diff",
    "diff_low",
    "diff_high",
    "diff_n",
    "p_value",
    "p_holm",
    "verdict",
    "mde",
    "seed_limited",
    "note",
]


def linearized(beyond: np.ndarray, within: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per seed (rows of (S, n) gains, or one (n,) row) the ratio of means R = mean(beyond) / mean(within),
    and per-record values whose mean over records is R (the influence values of the ratio)."""
    b, w = inf.as_seeds(beyond), inf.as_seeds(within)
    mean_w = w.mean(axis=1, keepdims=True)
    ratio = b.mean(axis=1, keepdims=True) / mean_w
    return ratio[:, 0], ratio + (b - ratio * w) / mean_w


@dataclass(frozen=True)
class Planned:
    """One retention cell: an arm at a window beyond L0, with its within-L0 window and its reference."""

    arm: str
    kind: str
    variant: str
    window: int
    within: int
    ref: str | None
    note: str
    """Why it has no test ('' when it has one, or when it has no reference)."""
    nested: bool = True
    """The arm's records are nested across windows (else only the ratio of means is defined, no interval)."""


def within_window(windows: list[int], base_len: int | None) -> int | None:
    """The longest copy window within L0 (its distance is the retention's denominator)."""
    inside = [w for w in windows if base_len is not None and w <= base_len]
    return max(inside) if inside else None


Gains = Callable[[str, int], pd.DataFrame]
"""(arm, window) -> records x seeds of gains (records every seed has)."""


def plan(
    recs: pd.DataFrame,
    gains: Gains,
    nested: set[str],
    base_len: int | None,
    reference: Callable[[str, str], str | None],
    caps: dict[str, dict[int, int]] | None = None,
) -> list[Planned]:
    """The retention cells of every arm, and which of them are tested (`Planned.ref` with no `note`).

    `recs`: one row per arm, seed, window and record; `nested`: arms whose records are nested across windows;
    `reference(kind, variant)`: the arm a comparison is made with, or None; `caps`: per arm, windows at which
    its attention windows cap the context (-> reach): an arm that cannot see the first copy retains nothing by
    construction, so such a cell gets no test."""
    if recs.empty:
        return []
    inside = within_window(sorted(set(recs["window"])), base_len)
    if inside is None:
        return []
    floor = {}
    for arm in dict.fromkeys(recs["arm"]):
        level = inf.level(gains(arm, inside).to_numpy().T)
        floor[arm] = level.low if level is not None else math.nan
    distance = recs.groupby("window")["distance"].first()
    out = []
    for arm, kind, variant in recs[["arm", "kind", "variant"]].drop_duplicates().itertuples(index=False):
        ref = reference(kind, variant)
        for window in sorted(w for w in set(recs[recs["arm"] == arm]["window"]) if w > inside):
            note = _why_not(arm, ref, nested, floor)
            d = int(distance[window])
            blind = [x for x in (arm, ref) if x is not None and (caps or {}).get(x, {}).get(window, d) < d]
            if blind and not note:
                note = f"{', '.join(blind)} cannot attend {d} tokens back (attention windows capped)"
            out.append(Planned(arm, kind, variant, int(window), inside, ref, note, arm in nested))
    return out


def _why_not(arm: str, ref: str | None, nested: set[str], floor: dict[str, float]) -> str:
    sides = [arm] + ([ref] if ref is not None else [])
    if any(s not in nested for s in sides):
        return "records not nested across windows (re-run copy_distance with this rlab)"
    weak = [s for s in sides if not floor.get(s, math.nan) >= USEFUL_GAIN]
    if weak:
        return f"no copy within L0 to retain ({', '.join(weak)}: gain's 95% lower bound < {USEFUL_GAIN:g})"
    return ""


def estimate(
    recs: pd.DataFrame, gains: Gains, planned: list[Planned], seed: int, draws: int
) -> tuple[list[dict], list[inf.Comparison | None]]:
    """Per planned cell: the retention with its studentized 95% interval, and vs its reference the paired test
    (None where there is none). Verdicts come later, from the copy family (`fill`)."""
    distance = recs.groupby("window")["distance"].first()
    rows, tests = [], []
    for p in planned:
        within, beyond = gains(p.arm, p.within).align(gains(p.arm, p.window), join="inner", axis=0)
        row = dict.fromkeys(COLUMNS, math.nan) | {
            "arm": p.arm,
            "kind": p.kind,
            "variant": p.variant,
            "window": p.window,
            "distance": int(distance[p.window]),
            "within_distance": int(distance[p.within]),
            "within_gain": float(within.to_numpy().mean()),
            "gain": float(beyond.to_numpy().mean()),
            "n": len(within),
            "n_seeds": within.shape[1],
            "ref": p.ref,
            "diff_n": pd.NA,
            "verdict": Verdict.NONE,
            "note": p.note,
        }
        if len(within) and (within.to_numpy().mean(axis=0) > 0).all():
            ratio, psi = linearized(beyond.to_numpy().T, within.to_numpy().T)
            level = inf.level(psi) if p.nested else None  # records of two windows pair only when nested
            if level is not None:
                row.update(retention=level.estimate, retention_low=level.low, retention_high=level.high)
            else:
                row.update(retention=float(ratio.mean()))
        test = None
        if p.ref is not None and not p.note:
            test = _compare(gains, p, seed, draws)
            if test is None:
                row["note"] = "no records both arms scored at both distances"
        rows.append(row)
        tests.append(test)
    return rows, tests


def _compare(gains: Gains, p: Planned, seed: int, draws: int) -> inf.Comparison | None:
    """The arm's retention minus its reference's, on the records both scored at both distances."""
    assert p.ref is not None
    parts = [gains(p.arm, p.within), gains(p.arm, p.window), gains(p.ref, p.within), gains(p.ref, p.window)]
    common = parts[0].index
    for part in parts[1:]:
        common = common.intersection(part.index)
    if not len(common):
        return None
    w, b, rw, rb = (part.loc[common].to_numpy().T for part in parts)
    if (w.mean(axis=1) <= 0).any() or (rw.mean(axis=1) <= 0).any():
        return None
    _, mine = linearized(b, w)
    _, theirs = linearized(rb, rw)
    return inf.compare(
        mine, theirs, rng=inf.rng_for(seed, f"copy-retention/{p.arm}-vs-{p.ref}/{p.window}"), draws=draws
    )


def fill(
    rows: list[dict],
    tests: list[inf.Comparison | None],
    adjusted: list[float | None],
    verdicts: list[Verdict],
    family: vd.Family,
) -> pd.DataFrame:
    """The retention frame, with each test's difference, Holm-adjusted p in the copy family, verdict and MDE."""
    for row, test, p, v in zip(rows, tests, adjusted, verdicts, strict=True):
        if test is None:
            continue
        row.update(
            diff=test.estimate,
            diff_low=test.low,
            diff_high=test.high,
            diff_n=test.n_units,
            p_value=math.nan if test.p_value is None else test.p_value,
            p_holm=math.nan if p is None else p,
            verdict=v,
            mde=test.mde(family.mde_alpha) if p is not None else math.nan,
            seed_limited=p is not None and test.seed_limited(family.mde_alpha),
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def per_tag(recs: pd.DataFrame, inside: int | None) -> pd.DataFrame:
    """Per tag (one seed) and window beyond `inside`: retention, its interval and the records behind it."""
    columns = ["tag", "window", "distance", "retention", "low", "high", "n"]
    if inside is None or recs.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for tag, g in recs.groupby("tag"):
        by = g.pivot_table(index="record", columns="window", values="gain")
        distance = g.groupby("window")["distance"].first()
        for window in (w for w in by.columns if w > inside and inside in by.columns):
            pair = by[[inside, window]].dropna()
            if not len(pair) or pair[inside].mean() <= 0:
                continue
            _, psi = linearized(pair[window].to_numpy(), pair[inside].to_numpy())
            level = inf.level(psi)
            if level is not None:
                rows.append(
                    [
                        tag,
                        int(window),
                        int(distance[window]),
                        level.estimate,
                        level.low,
                        level.high,
                        len(pair),
                    ]
                )
    return pd.DataFrame(rows, columns=columns)


# ---------------------------------------------------------------- rendering


def _where(kind: str, window: int, train_len: int | None) -> bool:
    """The distance whose retention the opening reports: the first past L0 (zero-shot), the training length
    (continued)."""
    return kind != "continued" or (train_len is not None and window >= train_len)


def verdict_word(r) -> str:
    """The verdict as the section prints it: the word, the MDE beside "within noise", '' where untested."""
    v = Verdict(r["verdict"]) if isinstance(r["verdict"], str) else Verdict.NONE
    if v is Verdict.WITHIN_NOISE:
        return vd.within_noise(float(r["mde"]), vd.row_seed_limited(r))
    return v.label(None if pd.isna(r["diff_n"]) else int(r["diff_n"]))


def _cell(r) -> str:
    if pd.isna(r["retention"]):
        return "n/a"
    if pd.isna(r["retention_low"]):
        return f"{r['retention']:.2f}"
    return f"{r['retention']:.2f} [{r['retention_low']:.2f}, {r['retention_high']:.2f}]"


def verdict_span(r) -> doc.Span | None:
    """The verdict as a typed span (None where untested)."""
    word = verdict_word(r)
    v = Verdict(r["verdict"]) if isinstance(r["verdict"], str) else Verdict.NONE
    return doc.verdict(v, word) if word else None


def _vs(r, shared: str = "") -> list[doc.Part]:
    span = verdict_span(r)
    if span is not None and not pd.isna(r["diff"]):
        return [f", vs {r['ref']} {r['diff']:+.2f} [{r['diff_low']:+.2f}, {r['diff_high']:+.2f}] ", span]
    if r["ref"] is not None and r["note"] and r["note"] != shared:
        return [f" (no verdict: {r['note']})"]
    return []


def sentences(kept: pd.DataFrame) -> list[doc.Text]:
    """One line per condition and distance beyond L0: each arm's retention, and its verdict vs the reference."""
    out = []
    for (kind, _), at in kept.groupby(["kind", "window"], sort=False):
        if kind == "base":
            continue
        notes = set(at[at["ref"].notna()]["note"])
        shared = notes.pop() if len(notes) == 1 else ""  # one reason for every arm: said once
        parts: list[doc.Part] = [
            f"{kind} arms, retention at distance {at['distance'].iloc[0]} (gain there / gain at "
            f"{at['within_distance'].iloc[0]}, same records): "
        ]
        for i, (_, r) in enumerate(at.iterrows()):
            parts += [("; " if i else "") + f"{r['variant']} {_cell(r)}", *_vs(r, shared)]
        parts.append(f" (no verdicts: {shared})" if shared else "")
        out.append(doc.text(*parts))
    return out


def answer_lines(kept: pd.DataFrame, train_len: int | None, family: vd.Family) -> list[doc.Text]:
    """The retention verdicts at a glance: zero-shot arms at the first distance past L0, continued arms at the
    training length (the same distances as the level lines), best first."""
    out = []
    for kind in ("zero-shot", "continued"):
        sub = kept[(kept["kind"] == kind) & kept["diff"].notna()]
        windows = sorted(w for w in set(sub["window"]) if _where(kind, w, train_len))
        if not windows:
            continue
        at = sub[sub["window"] == windows[0]].sort_values("diff", ascending=False)
        ref = at["ref"].iloc[0]
        ref_ret = kept[(kept["arm"] == ref) & (kept["window"] == windows[0])]["retention"]
        parts: list[doc.Part] = [
            f"Retention of the copy, {kind} arms (gain at distance {at['distance'].iloc[0]} / the same arm's gain "
            f"at {at['within_distance'].iloc[0]}, within L0; {ref} keeps "
            f"{float(ref_ret.iloc[0]) if len(ref_ret) else math.nan:.2f}): difference vs {ref}: "
        ]
        parts += each_variant(
            at,
            lambda r: (
                f"{r['variant']} {r['retention']:.2f} ({r['diff']:+.2f} [{r['diff_low']:+.2f}, "
                f"{r['diff_high']:+.2f}]) "
            ),
            verdict_span,
        )
        parts.append(f" ({family.describe()}).")
        out.append(doc.text(*parts))
    return out


def blocks(kept: pd.DataFrame) -> list[doc.Block]:
    """The retention table (arms x distances beyond L0, each tested cell with its verdict) and what it measures."""
    if kept.empty:
        return []
    windows = sorted(set(kept["window"]))
    distance = {w: int(kept[kept["window"] == w]["distance"].iloc[0]) for w in windows}
    within = int(kept["within_distance"].iloc[0])
    about = doc.text(
        doc.strong("Retention of the copy"),
        f" beyond L0: gain at distance d over the same arm's gain at d = {within} "
        "(the longest distance within L0), on the same records (nested: the same passage and filler, only the "
        f"gap grows), with its {mth.INTERVAL}; 1 = keeps all of it, 0 = none. Beside it, the difference "
        "from the reference arm's retention, paired by record, with its verdict (in the copy family, with the "
        f"levels). n/a: no copy within L0 to retain (gain's 95% lower bound < {USEFUL_GAIN:g})."
        + (
            " Here no arm's records are nested across windows (evaluated before rlab nested them): the cells are "
            "ratios of mean gains over different records, with no interval and no verdict."
            if kept["retention_low"].isna().all()
            else ""
        ),
    )
    columns = ["arm", *(f"d={distance[w]} (W={w})" for w in windows)]
    return [
        doc.Paragraph(about),
        doc.TableBlock(columns, arm_window_rows(kept, windows, _table_cell), align="plain"),
    ]


def _table_cell(r: pd.Series) -> doc.Cell:
    """A retention with its tested difference and verdict, where tested."""
    span = verdict_span(r)
    if span is None or pd.isna(r["diff"]):
        return doc.Cell(_cell(r))
    tested = f"; {r['diff']:+.2f} [{r['diff_low']:+.2f}, {r['diff_high']:+.2f}] {span.text}"
    return doc.Cell(_cell(r) + tested, span.verdict)
