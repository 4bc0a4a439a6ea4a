"""The comparison tables, as pandas frames of display strings plus which cells are "best".

Each builder takes a `ReportData` and returns a `Table` whose `about` line says what it measures
(which data, which length, which units). Rows are arms (a variant continued, zero-shot, or the base),
each the mean over its seeds. `section` turns a Table into the document model (`rlab.report.render.document`);
the CLI shows it as a rich table (the library never prints). The tables by context length are in
`rlab.report.render.length_tables`, the shared lookups and verdict words in `rlab.report.render.arm_values`.

Conventions: ``x ± h`` is the estimate and the half-width of its 95% interval; a change vs the
baseline is "better"/"worse" only when it is significant after the multiplicity correction, else
"≈ within noise"; "best" is marked only on a significant win; relative changes only where the
baseline is positive.
"""

from __future__ import annotations

import math

import pandas as pd

from rlab.evals.core.records import CoreMetric
from rlab.report.assemble.report_data import ReportData
from rlab.report.render import document as doc
from rlab.report.render import methods as mth
from rlab.report.render.arm_values import (
    VerdictRows,
    comparison,
    references_note,
    scalar,
    significant_best,
    units_phrase,
    verdict_text,
)
from rlab.report.render.length_tables import length_change_table, length_header, length_table
from rlab.report.render.retrieval import retrieval_table
from rlab.report.render.table_model import BLANK, Table, arm_order, change_cell, count_cell, fmt, plus_minus
from rlab.report.stats.estimates import NO_RELATIVE, passkey_summary


def bpb_table(data: ReportData) -> Table:
    b = data.baseline
    order = arm_order(data)
    built = VerdictRows()
    for arm in order:
        row = {"arm": data.label(arm)}
        for metric, col in (("train_bpb", "train BPB"), ("val_bpb", "val BPB")):
            v, lo, hi, _ = scalar(data, arm, metric)
            row[col] = plus_minus(v, lo, hi)
        comp = comparison(data, arm, "val_bpb")
        row[f"val Δ vs {b} (neg=better)"] = (
            change_cell(comp["rel_pct"], comp["rel_low"], comp["rel_high"]) if comp is not None else BLANK
        )
        row["verdict"] = verdict_text(comp)
        built.mark("verdict", comp)
        built.rows.append(row)
    frame = pd.DataFrame(
        built.rows, columns=["arm", "train BPB", "val BPB", f"val Δ vs {b} (neg=better)", "verdict"]
    )
    best = significant_best(data, "train_bpb", "train BPB", order) | significant_best(
        data, "val_bpb", "val BPB", order
    )
    units = "documents" if data.clustered else "eval units"
    return Table(
        "BPB on the train and val splits (bits per byte, lower is better)",
        frame,
        best,
        f"Δ: relative change of val BPB vs {b} in %, {mth.paired_interval(units)}; {mth.in_family()}.",
        about=f"Whole-split BPB at the eval's sequence length over fixed {units} of the train and val "
        f"splits (val: {units_phrase(data, 'val_bpb')} {units}). It measures short-context language "
        "modelling, not the use of long context." + references_note(data),
        verdicts=built.verdicts,
    )


def core_name(data: ReportData) -> str:
    """`CORE`, or `CORE (k of N tasks)` when the tags' CORE ran on a subset of the bundle (`eval.core_tasks`)."""
    labels = {
        core.label
        for src in (data.sources.tags if data.sources is not None else [])
        if (core := src.section(CoreMetric)) is not None
    }
    if labels in (set(), {"CORE"}):
        return "CORE"
    return labels.pop() if len(labels) == 1 else "CORE (task sets differ between tags)"


def core_table(data: ReportData) -> Table:
    b = data.baseline
    order = arm_order(data)
    built = VerdictRows()
    for arm in order:
        v, lo, hi, n = scalar(data, arm, "core")
        comp = comparison(data, arm, "core")
        built.mark("verdict", comp)
        built.rows.append(
            {
                "arm": data.label(arm),
                "CORE": plus_minus(v, lo, hi),
                "n examples": count_cell(n),
                f"Δ vs {b} (pos=better)": change_cell(
                    comp["diff"], comp["diff_low"], comp["diff_high"], 4, ""
                )
                if comp is not None
                else BLANK,
                "verdict": verdict_text(comp),
            }
        )
    frame = pd.DataFrame(
        built.rows, columns=["arm", "CORE", "n examples", f"Δ vs {b} (pos=better)", "verdict"]
    )
    name = core_name(data)
    return Table(
        f"{name} (centered accuracy, higher is better)".replace(" tasks) (", " tasks; "),
        frame,
        significant_best(data, "core", "CORE", order),
        f"Δ: CORE difference vs {b}, {mth.paired_interval('the shared examples, stratified by task')}; "
        f"{mth.in_family()}. No relative change: a baseline at or below 0 makes it meaningless.",
        about="DCLM CORE tasks (few-shot prompts at the model's context), mean over tasks of accuracy "
        "centered on random guessing." + references_note(data),
        verdicts=built.verdicts,
    )


def zero_shot_table(data: ReportData) -> Table:
    """Per variant: the primary endpoint zero-shot (RoPE applied, no training) and after continued training,
    each compared with the baseline variant in the same condition."""
    metric = data.primary.metric
    refs = {
        kind: next((c["reference"] for _, c in data.comparisons.iterrows() if c["kind"] == kind), None)
        for kind in ("zero-shot", "continued")
    }
    heads = {kind: f"{kind} Δ vs {refs[kind] or data.baseline_arm or data.baseline}" for kind in refs}
    built = VerdictRows()
    variants = [data.arm(k).variant for k in arm_order(data) if data.arm(k).kind != "base"]
    for variant in dict.fromkeys(variants):
        row = {"variant": variant}
        for kind in ("zero-shot", "continued"):
            key = next((a.key for a in data.arms if a.variant == variant and a.kind == kind), None)
            v, lo, hi, _ = scalar(data, key, metric) if key else (math.nan,) * 3 + (pd.NA,)
            comp = comparison(data, key, metric) if key else None
            row[kind] = plus_minus(v, lo, hi, 4)
            built.mark(heads[kind], comp)
            change = (
                change_cell(comp["rel_pct"], comp["rel_low"], comp["rel_high"])
                if comp is not None and not math.isnan(comp["rel_pct"])
                else change_cell(comp["diff"], comp["diff_low"], comp["diff_high"], 4, "")
                if comp is not None
                else BLANK
            )
            row[heads[kind]] = change + f" ({verdict_text(comp, short=True)})" if comp is not None else BLANK
        built.rows.append(row)
    base_key = next((a.key for a in data.arms if a.kind == "base"), None)
    if base_key:
        v, lo, hi, _ = scalar(data, base_key, metric)
        built.rows.append({"variant": "base (reference)", "zero-shot": plus_minus(v, lo, hi, 4)})
    frame = pd.DataFrame(
        built.rows, columns=["variant", "zero-shot", heads["zero-shot"], "continued", heads["continued"]]
    ).fillna(BLANK)
    return Table(
        f"Zero-shot vs continued: {data.primary.description}",
        frame,
        set(),
        ("Δ: difference in BPB" if data.primary.metric in NO_RELATIVE else "Δ: relative change in %")
        + f", {mth.paired_interval('documents')}; {mth.in_family()} (continued: primary; zero-shot: "
        "secondary). Each column compares "
        "arms in the same condition, so the zero-shot Δ is the RoPE change alone and the continued Δ "
        "the variant after the same training.",
        about="Zero-shot = the base checkpoint with the variant's RoPE applied and nothing trained; "
        "continued = after continued pretraining at the training length.",
        verdicts=built.verdicts,
    )


def _passkey_cell(cells: pd.DataFrame, length: int) -> str:
    iv = passkey_summary(cells, length)
    return BLANK if iv is None else f"{iv.estimate:.2f} [{iv.low:.2f}, {iv.high:.2f}] n={iv.n_units}"


def passkey_all_zero(data: ReportData) -> bool:
    return len(data.passkey) > 0 and bool((data.passkey["accuracy"] == 0).all())


def passkey_table(data: ReportData) -> Table:
    """Passkey accuracy by length × arm over all depths: accuracy [95% Wilson interval] n=keys."""
    pk = data.passkey
    lengths = sorted(set(pk["length"].astype(int))) if len(pk) else []
    headers = {L: length_header(data, L) for L in lengths}
    built = VerdictRows()
    for arm in arm_order(data):
        tags = data.arm(arm).tags
        part = pk[pk["tag"].isin(tags)]
        if part.empty:
            continue
        cells = (
            part.groupby(["length", "depth"]).agg(accuracy=("accuracy", "mean"), n=("n", "min")).reset_index()
        )
        row = {"arm": data.label(arm)}
        for L in lengths:
            row[headers[L]] = _passkey_cell(cells, L)
        comp = comparison(data, arm, "passkey_overall")
        row["verdict"] = verdict_text(comp)
        built.mark("verdict", comp)
        built.rows.append(row)
    frame = pd.DataFrame(built.rows, columns=["arm", *headers.values(), "verdict"])
    return Table(
        "Passkey retrieval accuracy",
        frame,
        set(),
        f"accuracy [{mth.WILSON}] n = independent keys, over all depths; verdict on all lengths "
        f"pooled, paired by key ({mth.TEST} of the discordant keys; {mth.in_family()}).",
        about="A random key hidden at several depths of filler text of each length; the model must "
        "repeat it.",
        verdicts=built.verdicts,
    )


def core_task_table(data: ReportData) -> Table:
    """Centered accuracy per CORE task × arm (point estimates; no per-task verdicts)."""
    ct = data.core_tasks
    order = [a for a in arm_order(data) if len(ct) and ct["tag"].isin(data.arm(a).tags).any()]
    labels = {a: data.label(a) for a in order}
    tasks = sorted(set(ct["task"])) if len(ct) else []
    rows = []
    for task in tasks:
        row = {"task": task}
        for arm in order:
            hit = ct[ct["tag"].isin(data.arm(arm).tags) & (ct["task"] == task)]
            row[labels[arm]] = fmt(float(hit["centered"].mean()) if len(hit) else math.nan, 3)
            if len(hit):
                row["n"] = count_cell(hit["n"].iloc[0])
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["task", "n", *labels.values()]).fillna(BLANK)
    return Table(
        "CORE per task (centered accuracy)",
        frame,
        set(),
        "Point estimates only: per-task samples are too small for per-task verdicts.",
        about="Each CORE task's accuracy centered on random guessing; n = examples of the task.",
    )


def _has_other_conditions(data: ReportData) -> bool:
    return any(a.kind != "continued" for a in data.arms)


def main_tables(data: ReportData) -> list[Table]:
    """The tables the terminal shows."""
    tables = [length_change_table(data)] + ([zero_shot_table(data)] if _has_other_conditions(data) else [])
    tables += [bpb_table(data), core_table(data)]
    if len(data.passkey) and not passkey_all_zero(data):
        tables.append(passkey_table(data))
    tables += _retrieval(data)
    return [t for t in tables if _has_values(t)]


def _retrieval(data: ReportData) -> list[Table]:

    table = retrieval_table(data)
    return [] if table is None else [table]


def _has_values(table: Table) -> bool:
    """A table with a measured cell: an eval nobody ran gives rows of arm names and blanks, not a table."""
    return not table.frame.empty and bool(table.frame.iloc[:, 1:].astype(str).ne(BLANK).to_numpy().any())


def all_tables(data: ReportData) -> list[Table]:
    tables = [length_change_table(data)] + ([zero_shot_table(data)] if _has_other_conditions(data) else [])
    tables += [length_table(data), bpb_table(data), core_table(data)]
    if len(data.passkey) and not passkey_all_zero(data):
        tables.append(passkey_table(data))
    tables += _retrieval(data)
    tables.append(core_task_table(data))
    return [t for t in tables if _has_values(t)]


# ---------------------------------------------------------------- into the document model


def block(table: Table) -> doc.TableBlock:
    """The table as a document table: display strings, the verdict each cell states, the significant best."""
    columns = [str(c) for c in table.frame.columns]
    rows = [
        [
            doc.Cell(
                "" if val is None else str(val),
                table.verdicts.get((i, col)),
                (i, col) in table.best,
            )
            for col, val in zip(columns, row, strict=True)
        ]
        for i, row in enumerate(table.frame.itertuples(index=False))
    ]
    return doc.TableBlock(columns, rows)


def section(table: Table) -> doc.Section:
    """`## title`, what it measures, the table, then its caption (when it has rows)."""
    blocks: list[doc.Block] = [doc.Paragraph(doc.prose(table.about), "about")] if table.about else []
    blocks.append(block(table))
    if table.caption and not table.frame.empty:
        blocks.append(doc.Paragraph(doc.prose(table.caption), "caption"))
    return doc.Section(table.title, blocks)
