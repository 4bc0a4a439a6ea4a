"""The comparison tables, as pandas frames of display strings plus which cells are "best".

Each builder takes a `ReportData` and returns a `Table`; renderers turn a Table into markdown or
HTML here, and into a rich table in the CLI (the library never prints). Markdown is rendered by
this module (a pipe table from the frame), so the report needs no `tabulate` dependency.

Conventions: ``x ± h`` is the estimate and the half-width of its 95% interval; a change vs the
baseline is "better"/"worse" only when its interval excludes 0, otherwise "≈ within noise".
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import pandas as pd

from rlab.report.collect import ReportData

BLANK = ""


@dataclass
class Table:
    title: str
    frame: pd.DataFrame
    """Display strings; the first column labels the rows."""
    best: set[tuple[int, str]] = field(default_factory=set)
    """(row position, column name) of cells to highlight."""
    caption: str = ""


def _fmt(value: float, digits: int = 4) -> str:
    return BLANK if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _pm(value: float, low: float, high: float, digits: int = 4) -> str:
    if math.isnan(value):
        return BLANK
    if math.isnan(low) or math.isnan(high):
        return _fmt(value, digits)
    return f"{value:.{digits}f} ± {(high - low) / 2:.{digits}f}"


def _signed(value: float, digits: int, unit: str = "") -> str:
    return BLANK if math.isnan(value) else f"{value:+.{digits}f}{unit}"


def _change(value: float, low: float, high: float, digits: int = 2, unit: str = "%") -> str:
    """``+1.23% [+0.80, +1.70]``."""
    if math.isnan(value):
        return BLANK
    if math.isnan(low) or math.isnan(high):
        return _signed(value, digits, unit)
    return f"{value:+.{digits}f}{unit} [{low:+.{digits}f}, {high:+.{digits}f}]"


def tag_order(data: ReportData) -> list[str]:
    """Rows: the baseline tag first, then the spec's variant order, then by tag."""
    spec_variants = []
    if data.sources is not None:
        from rlab.report.sources import spec_variant_names

        spec_variants = spec_variant_names(data.sources.spec)

    def key(row: pd.Series) -> tuple:
        v = row["variant"]
        return (row["tag"] != data.baseline_tag, spec_variants.index(v) if v in spec_variants else len(spec_variants),
                row["tag"])

    rows = sorted((r for _, r in data.meta.iterrows()), key=key)
    return [r["tag"] for r in rows]


def _scalar(data: ReportData, tag: str, metric: str) -> tuple[float, float, float]:
    s = data.scalars
    hit = s[(s["tag"] == tag) & (s["metric"] == metric)]
    if hit.empty:
        return math.nan, math.nan, math.nan
    r = hit.iloc[0]
    return float(r["value"]), float(r["ci_low"]), float(r["ci_high"])


def _comparison(data: ReportData, tag: str, metric: str) -> pd.Series | None:
    c = data.comparisons
    hit = c[(c["tag"] == tag) & (c["metric"] == metric)]
    return None if hit.empty or tag == data.baseline_tag else hit.iloc[0]


def _mark_best(frame: pd.DataFrame, values: dict[str, list[float]], lower: dict[str, bool]) -> set[tuple[int, str]]:
    """Cells holding each column's best value (ties all marked)."""
    best = set()
    for col, vals in values.items():
        finite = [v for v in vals if not math.isnan(v)]
        if len(finite) < 2:
            continue
        target = min(finite) if lower[col] else max(finite)
        if all(v == target for v in finite):  # everyone tied: nobody is best
            continue
        best.update((i, col) for i, v in enumerate(vals) if v == target)
    return best


def bpb_table(data: ReportData) -> Table:
    b = data.baseline
    rows, vals = [], {"train BPB": [], "val BPB": []}
    for tag in tag_order(data):
        row = {"variant": data.label(tag)}
        for metric, col in (("train_bpb", "train BPB"), ("val_bpb", "val BPB")):
            v, lo, hi = _scalar(data, tag, metric)
            row[col] = _pm(v, lo, hi)
            vals[col].append(v)
        comp = _comparison(data, tag, "val_bpb")
        row[f"val Δ vs {b} (neg=better)"] = _change(comp["rel_pct"], comp["rel_low"], comp["rel_high"]) if comp is not None else BLANK
        row["verdict"] = comp["verdict"] if comp is not None else BLANK
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["variant", "train BPB", "val BPB", f"val Δ vs {b} (neg=better)", "verdict"])
    return Table("BPB (bits per byte, lower is better)", frame,
                 _mark_best(frame, vals, {"train BPB": True, "val BPB": True}),
                 f"Δ: relative change of val BPB vs {b} in %, with its 95% paired-bootstrap interval.")


def core_table(data: ReportData) -> Table:
    b = data.baseline
    rows, vals = [], {"CORE": []}
    for tag in tag_order(data):
        v, lo, hi = _scalar(data, tag, "core")
        vals["CORE"].append(v)
        comp = _comparison(data, tag, "core")
        rows.append({
            "variant": data.label(tag), "CORE": _pm(v, lo, hi),
            f"Δ vs {b} (pos=better)": _change(comp["diff"], comp["diff_low"], comp["diff_high"], 4, "")
            if comp is not None else BLANK,
            f"rel Δ vs {b} (pos=better)": _signed(comp["rel_pct"], 1, "%") if comp is not None else BLANK,
            "verdict": comp["verdict"] if comp is not None else BLANK,
        })
    frame = pd.DataFrame(rows, columns=["variant", "CORE", f"Δ vs {b} (pos=better)", f"rel Δ vs {b} (pos=better)",
                                        "verdict"])
    return Table("CORE (centered accuracy, higher is better)", frame, _mark_best(frame, vals, {"CORE": False}),
                 f"Δ: CORE difference vs {b} with its 95% bootstrap interval, paired on shared examples.")


def _length_header(data: ReportData, length: int) -> str:
    train = set(data.meta["train_seq_len"].dropna().astype(int))
    orig = set(data.meta["rope_original_len"].dropna().astype(int))
    tags = [t for t, cond in (("train", length in train), ("orig", length in orig)) if cond]
    return f"{length}" + (f" ({', '.join(tags)})" if tags else "")


def length_table(data: ReportData) -> Table:
    """BPB by context length × variant, best (lowest) per length marked."""
    lengths = sorted(set(data.bpb_length["length"].astype(int))) if len(data.bpb_length) else []
    headers = {L: _length_header(data, L) for L in lengths}
    rows, vals = [], {headers[L]: [] for L in lengths}
    for tag in tag_order(data):
        row = {"variant": data.label(tag)}
        for L in lengths:
            v, lo, hi = _scalar(data, tag, f"bpb_len_{L}")
            row[headers[L]] = _pm(v, lo, hi, 3)
            vals[headers[L]].append(v)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["variant", *headers.values()])
    return Table("BPB vs context length (tokens)", frame, _mark_best(frame, vals, dict.fromkeys(vals, True)),
                 "Best (lowest) BPB per length in bold; (train) = continued-training length, (orig) = original length L0.")


def length_change_table(data: ReportData) -> Table:
    """Relative BPB change vs the baseline at each length, with the verdict."""
    lengths = sorted(set(data.bpb_length["length"].astype(int))) if len(data.bpb_length) else []
    headers = {L: _length_header(data, L) for L in lengths}
    rows = []
    for tag in tag_order(data):
        if tag == data.baseline_tag:
            continue
        row = {"variant": data.label(tag)}
        for L in lengths:
            comp = _comparison(data, tag, f"bpb_len_{L}")
            if comp is None:
                row[headers[L]] = BLANK
                continue
            word = {"better": "better", "worse": "worse", "≈ within noise": "≈"}.get(comp["verdict"], "")
            row[headers[L]] = _signed(comp["rel_pct"], 1, "%") + (f" ({word})" if word else "")
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["variant", *headers.values()])
    return Table(f"BPB change vs {data.baseline} by context length (neg=better)", frame, set(),
                 "≈ = the 95% paired-bootstrap interval of the difference contains 0 (within noise).")


def passkey_table(data: ReportData) -> Table:
    """Passkey accuracy (mean over depths) by length × variant, best (highest) per length marked."""
    pk = data.passkey
    lengths = sorted(set(pk["length"].astype(int))) if len(pk) else []
    by = pk.groupby(["tag", "length"])["accuracy"].mean() if len(pk) else pd.Series(dtype=float)
    headers = {L: _length_header(data, L) for L in lengths}
    rows, vals = [], {headers[L]: [] for L in lengths}
    for tag in tag_order(data):
        row = {"variant": data.label(tag)}
        for L in lengths:
            v = float(by.get((tag, L), math.nan))
            row[headers[L]] = _fmt(v, 2)
            vals[headers[L]].append(v)
        ov, _, _ = _scalar(data, tag, "passkey_overall")
        row["overall"] = _fmt(ov, 2)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["variant", *headers.values(), "overall"])
    return Table("Passkey retrieval accuracy (mean over depths)", frame,
                 _mark_best(frame, vals, dict.fromkeys(vals, False)), "Best (highest) accuracy per length in bold.")


def core_task_table(data: ReportData) -> Table:
    """Centered accuracy per CORE task × variant, with a "best" column."""
    ct = data.core_tasks
    order = [t for t in tag_order(data) if len(ct) and (ct["tag"] == t).any()]
    labels = {t: data.label(t) for t in order}
    tasks = sorted(set(ct["task"])) if len(ct) else []
    rows, best = [], set()
    for i, task in enumerate(tasks):
        row = {"task": task}
        vals = {}
        for tag in order:
            hit = ct[(ct["tag"] == tag) & (ct["task"] == task)]
            v = float(hit["centered"].iloc[0]) if len(hit) else math.nan
            row[labels[tag]] = _fmt(v, 3)
            vals[labels[tag]] = v
        finite = {k: v for k, v in vals.items() if not math.isnan(v)}
        if len(finite) >= 2:
            top = max(finite.values())
            winners = [k for k, v in finite.items() if v == top]
            if len(winners) < len(finite):
                best.update((i, k) for k in winners)
                row["best"] = ", ".join(w.split(" [")[0] for w in winners)
            else:
                row["best"] = "tie"
        else:
            row["best"] = BLANK
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["task", *labels.values(), "best"])
    return Table("CORE per task (centered accuracy)", frame, best,
                 "Point estimates per task; per-task differences are usually within noise at small sample sizes.")


def main_tables(data: ReportData) -> list[Table]:
    """The tables the terminal shows."""
    return [bpb_table(data), core_table(data), length_table(data), passkey_table(data)]


def all_tables(data: ReportData) -> list[Table]:
    return [bpb_table(data), core_table(data), length_table(data), length_change_table(data),
            passkey_table(data), core_task_table(data)]


# ---------------------------------------------------------------- renderers


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    """A GitHub pipe table; best cells in bold; the first column left-aligned, the rest right-aligned."""
    frame = table.frame
    if frame.empty:
        return "_(no data yet)_\n"
    cols = list(frame.columns)
    lines = ["| " + " | ".join(_md_cell(c) for c in cols) + " |",
             "|" + "|".join([":---"] + ["---:"] * (len(cols) - 1)) + "|"]
    for i, row in enumerate(frame.itertuples(index=False)):
        cells = []
        for col, val in zip(cols, row, strict=True):
            text = _md_cell(val)
            cells.append(f"**{text}**" if (i, col) in table.best and text else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_html(table: Table) -> str:
    frame = table.frame
    if frame.empty:
        return "<p><em>(no data yet)</em></p>\n"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for i, row in enumerate(frame.itertuples(index=False)):
        cells = []
        for col, val in zip(frame.columns, row, strict=True):
            cls = ' class="best"' if (i, col) in table.best and val else ""
            cells.append(f"<td{cls}>{html.escape(str(val))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>\n"
