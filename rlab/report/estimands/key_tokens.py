"""Key-token BPB: BPB at each length on the targets that need long context, chosen without favouring any arm.

LongPPL (Fang et al., ICLR 2025) scores perplexity only on the tokens whose loss drops most with long context,
and finds that it tracks LongBench across models (r = -0.96) where plain perplexity does not. Here the targets
are BPB vs length's (`bpb_targets.csv`: every scored target at every length, the same text for every arm):

* **Selection** reads the *base's* loss drop per target, ``nats(L_s) - nats(L_long)`` (L_s the shortest
  evaluated length, L_long the longest within L0), grouped into cells by a text feature: how far back the
  bigram ending at the target last occurred in its document (`repeat`, in powers of two; 0 = never). The cells
  with the largest mean drop, up to `KEY_SHARE` of the targets, are the key cells.
* **Cross-fitting**: documents fall into two halves (a hash of their id); the key cells of one half are chosen
  on the other half's losses, so no target is selected by its own loss, and an arm that equals the base on some
  targets (a zero-shot arm within L0) gains nothing from the base's luck on them (`tests/report/
  calibration_estimands.py` shows the in-sample choice would).
* **Estimate**: per arm and length, BPB over the key targets, units = documents (`uncertainty.bpb_interval`);
  against the arm's reference the report's paired test by document (`uncertainty.bpb_paired_diff`), Holm over
  the section's testable comparisons (family ``key-token``), beside the plain BPB-at-length verdict.

A tag without bpb_targets.csv (an older eval, the sliding protocol, `eval.length_target_losses: false`) gives no
key-token BPB, and the report says so once.
"""

from __future__ import annotations

import math
import zlib
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rlab.report.estimands.arm_row import ArmRow
from rlab.report.estimands.retention import short_length
from rlab.report.stats import inference as inf
from rlab.report.stats import uncertainty as unc
from rlab.report.stats import verdicts as vd
from rlab.report.stats.verdicts import Verdict

if TYPE_CHECKING:
    from rlab.report.assemble.measured import Measured

NAME = "key_token_bpb"
FAMILY = "key-token"
KEY_SHARE = 0.2
"""At most this share of targets is key (LongPPL's key tokens are a minority; the cell with the largest drop is
always taken)."""
MIN_CELL = 20
"""Targets a cell needs in the selecting half before its mean drop is trusted."""
CSV = "bpb_targets"


class KeyTokenRow(ArmRow):
    """One arm's key-token BPB at one length, with its comparison to the reference arm."""

    length: int
    key_bpb: float | None = None
    low: float | None = None
    high: float | None = None
    n_units: int = 0
    """Documents with key targets."""
    n_targets: int = 0
    """Key targets per seed."""
    share: float | None = None
    """Key targets over all scored targets."""
    n_seeds: int = 1
    plain_bpb: float | None = None
    """BPB at this length on every target (the report's `bpb_len_<L>`)."""
    reference: str | None = None
    diff: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    verdict: Verdict = Verdict.NONE
    plain_diff: float | None = None
    plain_verdict: Verdict = Verdict.NONE
    selection: str = ""
    """How the key targets were chosen (the same for every row of one report)."""
    note: str = ""

    def cell(self) -> str:
        """``1.234 ± 0.02; -0.010 [-0.02, -0.001] better (plain -0.002 ≈ within noise)``."""
        if self.key_bpb is None:
            return self.note
        half = (self.high - self.low) / 2 if self.low is not None and self.high is not None else None
        text = f"{self.key_bpb:.3f}" + (f" ± {half:.3f}" if half is not None else "")
        if self.diff is not None and self.diff_low is not None:
            text += f"; {self.diff:+.3f} [{self.diff_low:+.3f}, {self.diff_high:+.3f}] {self.verdict.label()}"
            if self.plain_diff is not None:
                text += f" (plain {self.plain_diff:+.3f} {self.plain_verdict.label()})"
        return text


def bucket(repeat: np.ndarray) -> np.ndarray:
    """The selection cell of each target: 0 = its bigram never occurred before, k >= 1 = last seen 2^(k-1) ..
    2^k - 1 tokens back."""
    r = np.asarray(repeat, dtype=np.int64)
    return np.where(r > 0, np.floor(np.log2(np.maximum(r, 1))).astype(np.int64) + 1, 0)


def fold_of(docs: pd.Series | np.ndarray) -> np.ndarray:
    """Each document's half (0 or 1), from a hash of its id: the same for every arm, tag and run."""
    return np.array([zlib.crc32(str(d).encode("utf-8")) % 2 for d in docs], dtype=np.int64)


def key_cells(drop: np.ndarray, cells: np.ndarray) -> set[int]:
    """Cells with the largest mean drop (positive, at least `MIN_CELL` targets) up to `KEY_SHARE` of targets."""
    frame = pd.DataFrame({"drop": drop, "cell": cells})
    stats = frame.groupby("cell")["drop"].agg(["mean", "size"])
    stats = stats[(stats["size"] >= MIN_CELL) & (stats["mean"] > 0)].sort_values("mean", ascending=False)
    chosen: set[int] = set()
    taken = 0
    for cell, row in stats.iterrows():
        if chosen and taken + row["size"] > KEY_SHARE * len(drop):
            break
        chosen.add(int(cell))
        taken += int(row["size"])
    return chosen


def key_mask(drop: np.ndarray, cells: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """Per target: key or not, its half's key cells chosen on the other half's drops (cross-fitting)."""
    mask = np.zeros(len(drop), dtype=bool)
    for f in (0, 1):
        chosen = key_cells(drop[folds != f], cells[folds != f])
        mask |= (folds == f) & np.isin(cells, list(chosen))
    return mask


def _targets(data: Measured, tag: str) -> pd.DataFrame | None:
    """bpb_targets.csv of a tag joined with its blocks' documents (bpb_units.csv): length, unit, position, doc,
    bytes, repeat, nats."""
    src = next((s for s in data.sources.tags if s.tag == tag), None) if data.sources else None
    frame = src.csvs.get(CSV) if src is not None else None
    units = src.csvs.get("bpb_units") if src is not None else None
    if frame is None or frame.empty or units is None or "doc" not in units.columns:
        return None
    docs = (
        units[units["metric"].astype(str).str.startswith("len_")][["unit", "doc"]]
        .astype(str)
        .drop_duplicates()
    )
    out = frame.assign(unit=frame["unit"].astype(str)).merge(docs.drop_duplicates("unit"), on="unit")
    return out if len(out) == len(frame) else None


def _selection(data: Measured, base_tags: list[str], L0: int | None) -> tuple[pd.DataFrame, str] | str:
    """(targets with their `key` flag, a description) from the base's losses, or why there is none."""
    frames = [_targets(data, t) for t in base_tags]
    if not base_tags or any(f is None for f in frames):
        return "no base model with bpb_targets.csv: key tokens are chosen by the base's own losses"
    lengths = sorted(set(frames[0]["length"].astype(int)))  # type: ignore[index]
    within = [L for L in lengths if L0 is not None and L <= L0]
    if len(within) < 2:
        return "needs two evaluated lengths within L0 (a short and a long context for the base)"
    short, long = within[0], within[-1]
    on = ["unit", "position"]
    per = []
    for f in frames:
        assert f is not None
        s = f[f["length"] == short].set_index(on)
        lg = f[f["length"] == long].set_index(on)
        per.append(s["nats"] - lg["nats"].reindex(s.index))
    drop = pd.concat(per, axis=1).mean(axis=1)
    first = frames[0]
    assert first is not None
    sel = first[first["length"] == short].set_index(on)[["doc", "bytes", "repeat"]].copy()
    sel["drop"] = drop.reindex(sel.index)
    sel = sel[sel["drop"].notna() & (sel["bytes"] > 0)]
    sel["key"] = key_mask(
        sel["drop"].to_numpy(), bucket(sel["repeat"].to_numpy()), fold_of(sel["doc"].to_numpy())
    )
    about = (
        f"key targets: {sel['key'].mean():.0%} of {len(sel)} targets, chosen by the base's loss drop from L = "
        f"{short} to L = {long} per bigram-repeat distance, each half of the documents by the other half"
    )
    return sel.reset_index(), about


def _doc_sums(per_tag: dict[str, pd.DataFrame | None], tags: list[str], keys: pd.DataFrame, length: int):
    """(nats (S, docs), bytes (docs,)) over the key targets every tag scored at `length`; or None.

    `per_tag`: each tag's targets as (unit, position) x length nats (`_by_length`)."""
    frames = [per_tag.get(t) for t in tags]
    if any(f is None or length not in f.columns for f in frames):
        return None
    nats = np.vstack([f[length].reindex(keys.index).to_numpy(dtype=float) for f in frames])  # type: ignore[index]
    ok = ~np.isnan(nats).any(axis=0)
    if not ok.any():
        return None
    doc = keys["doc"].to_numpy()[ok]
    sums = (
        pd.DataFrame(nats[:, ok].T).assign(doc=doc, bytes=keys["bytes"].to_numpy()[ok]).groupby("doc").sum()
    )
    return sums[list(range(len(frames)))].to_numpy(dtype=float).T, sums["bytes"].to_numpy(dtype=float)


def _by_length(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """A tag's targets as nats by (unit, position) x length."""
    if frame is None:
        return None
    return frame.pivot_table(index=["unit", "position"], columns="length", values="nats", aggfunc="first")


def analyse(data: Measured, seed: int = 0, draws: int = inf.SIGN_FLIP_DRAWS) -> list[KeyTokenRow]:
    """Every arm's key-token BPB at every length of the base's targets, compared with its reference arm."""

    base = next((a for a in data.arms if a.kind == "base"), None)
    if not any(CSV in s.csvs for s in (data.sources.tags if data.sources else [])):
        if not data.bpb_length.empty:
            data.footnotes.add(
                "key-token BPB not computed: no tag has bpb_targets.csv (written by `rlab eval` since the "
                "key-token estimand, same_targets protocol)"
            )
        return []
    got = _selection(data, base.tags if base is not None else [], short_length(data))
    if isinstance(got, str):
        data.footnotes.add(f"key-token BPB not computed: {got}")
        return []
    sel, about = got
    keys = sel[sel["key"]].set_index(["unit", "position"])
    per_tag = {t: _by_length(_targets(data, t)) for a in data.arms for t in a.tags}
    lengths = sorted(set(_targets(data, base.tags[0])["length"].astype(int)))  # type: ignore[union-attr,index]
    refs = dict(zip(data.comparisons["arm"], data.comparisons["reference"], strict=False))
    arms = {a.key: a for a in data.arms}
    rows: list[KeyTokenRow] = []
    tests: list[inf.Comparison | None] = []
    for arm in (
        a for a in data.arms if base is None or a.group == base.group
    ):  # unit ids name one experiment's text
        for length in lengths:
            row = KeyTokenRow.of(
                arm,
                length=length,
                n_seeds=arm.n_seeds,
                selection=about,
            )
            rows.append(row)
            tests.append(None)
            mine = _doc_sums(per_tag, arm.tags, keys, length)
            if mine is None:
                row.note = "no bpb_targets.csv"
                continue
            level = unc.bpb_interval(mine[0], mine[1])
            assert level is not None
            row.key_bpb, row.low, row.high = level.estimate, level.low, level.high
            row.n_units, row.n_targets, row.share = level.n_units, len(keys), len(keys) / max(1, len(sel))
            row.plain_bpb = _scalar(data, arm.key, f"bpb_len_{length}")
            ref = arms.get(refs.get(arm.key, ""))
            if ref is None or ref.group != arm.group:
                continue
            both = _doc_sums(per_tag, arm.tags + ref.tags, keys, length)
            if both is None:
                continue
            nats, nbytes = both
            k = arm.n_seeds
            paired = unc.bpb_paired_diff(
                nats[:k], nbytes, nats[k:], nbytes, key=f"{NAME}:{arm.key}/{length}", seed=seed, draws=draws
            )
            if paired is None:
                continue
            c = paired.diff
            row.reference, row.diff, row.diff_low, row.diff_high = ref.key, c.estimate, c.low, c.high
            row.p_value = c.p_value
            row.plain_diff, row.plain_verdict = _plain(data, arm.key, length)
            tests[-1] = c
    _, adjusted, verdicts = vd.decide_family(FAMILY, tests, [True] * len(tests))
    for row, p, v, t in zip(rows, adjusted, verdicts, tests, strict=True):
        if t is not None:
            row.p_holm, row.verdict = p, v
    return rows


def _scalar(data: Measured, arm: str, metric: str) -> float | None:
    hit = data.scalars[(data.scalars["arm"] == arm) & (data.scalars["metric"] == metric)]
    return float(hit["value"].iloc[0]) if len(hit) and not math.isnan(hit["value"].iloc[0]) else None


def _plain(data: Measured, arm: str, length: int) -> tuple[float | None, Verdict]:
    c = data.comparisons
    hit = c[(c["arm"] == arm) & (c["metric"] == f"bpb_len_{length}")]
    if hit.empty or pd.isna(hit["diff"].iloc[0]):
        return None, Verdict.NONE
    return float(hit["diff"].iloc[0]), Verdict(hit["verdict"].iloc[0])


def family(rows: list[KeyTokenRow]) -> vd.Family | None:
    """The section's Holm family (its testable comparisons), or None without any."""
    size = sum(r.p_holm is not None for r in rows)
    return vd.Family(FAMILY, size) if size else None


def wide_columns(rows: list[KeyTokenRow], baseline: str) -> dict[str, dict[str, object]]:
    """results.csv cells per arm: ``key_bpb_len_<L>`` with interval and documents, and its comparison."""
    out: dict[str, dict[str, object]] = {}
    for r in rows:
        if r.key_bpb is None:
            continue
        name, cells = f"key_bpb_len_{r.length}", out.setdefault(r.arm, {})
        cells[name], cells[f"{name}_ci_low"], cells[f"{name}_ci_high"] = r.key_bpb, r.low, r.high
        cells[f"{name}_n_units"] = r.n_units
        cells[f"{name}_n_targets"] = r.n_targets
        if r.diff is not None:
            diff = f"{name}_diff_vs_{baseline}"
            cells[f"{diff} (neg=better)"], cells[f"{diff}_ci_low"], cells[f"{diff}_ci_high"] = (
                r.diff,
                r.diff_low,
                r.diff_high,
            )
            cells[f"{name}_p_holm_vs_{baseline}"] = r.p_holm
            cells[f"{name}_verdict_vs_{baseline}"] = r.verdict.value
    return out
