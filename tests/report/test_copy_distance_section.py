"""The report's copy-by-distance section: paired per-record comparisons, verdicts, table, plot, HTML."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlab.evals.copy_distance import CSV as COPY_DISTANCE_CSV
from rlab.evals.copy_distance.records import CopyRow
from rlab.records.rows import read_rows, write_rows
from rlab.report.assemble.collect import collect
from rlab.report.build import answer_lines, write_report
from rlab.report.copy_distance import section as copy_distance
from rlab.report.copy_distance.section import base_caveat
from rlab.report.render.document import plain
from rlab.report.stats.verdicts import Verdict


def _write(fx, tag: str, copy_at_long: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for window, copy in ((64, 0.5), (256, copy_at_long)):
        for i in range(24):
            first = 5.0 + 0.3 * rng.standard_normal()
            rows.append(
                CopyRow(
                    window=window,
                    distance=window - 40,
                    record=i,
                    control_nats=first,
                    copy_nats=copy + 0.1 * rng.standard_normal(),
                    copy_acc=0.8,
                    tokens=31,
                )
            )
    write_rows(fx.eval_dir(tag) / COPY_DISTANCE_CSV, rows)


def test_section_compares_arms_on_the_same_records(fx):
    _write(fx, "fx-rope", copy_at_long=4.5, seed=0)  # rope loses the copy at the long distance
    _write(fx, "fx-yarn", copy_at_long=1.0, seed=1)  # yarn keeps it
    out = write_report(fx, fmt="html", draws=200)
    md = fx.comparison_md.read_text()
    assert "## Long-range use: copy loss by distance" in md
    line = next(s for s in md.splitlines() if "distance 216 (window 256)" in s)
    # gains over the control, and the paired difference of gains: yarn keeps the copy, rope loses it
    assert "rope +0.54" in line and "yarn +4.04, vs rope +3.51" in line and "**better**" in line
    assert "| d=24 (W=64) | d=216 (W=256) |" in md
    assert (
        fx.plots_dir / "copy_distance.png"
    ).is_file() and fx.plots_dir / "copy_distance.png" in out.written
    assert "Long-range use" in fx.comparison_md.with_suffix(".html").read_text()


def test_no_copy_results_no_section(fx):
    write_report(fx, draws=200)
    assert "copy loss by distance" not in fx.comparison_md.read_text()


def _base_cells(gain: float, low: float, high: float):

    row = dict(
        arm="base",
        kind="base",
        variant="rope",
        copy=5.0 - gain,
        control=5.0,
        gain=gain,
        gain_low=low,
        gain_high=high,
        acc=0.1,
        n=32,
    )
    return pd.DataFrame(
        [
            {**row, "window": 128, "distance": 88},
            {**row, "window": 256, "distance": 216},
            {**row, "window": 1024, "distance": 984, "gain": 3.0, "gain_low": 2.0},
        ]
    )


def test_caveat_when_the_base_gains_nothing_from_a_repeat_within_its_training_length():

    line = base_caveat(_base_cells(-0.01, -0.06, 0.03), base_len=256)
    # judged at the longest distance within L0 (216), not beyond it where the fixture gains 3 nats
    assert line is not None and "216 tokens back" in line and "gain -0.01 [-0.06, +0.03]" in line
    assert "not context extension" in line
    assert base_caveat(_base_cells(1.5, 1.2, 1.8), base_len=256) is None  # a base that copies: no caveat
    # a gain that is real but negligible (hundredths of a nat; the demo's base) is no use of context either
    assert "little or no use" in base_caveat(_base_cells(0.02, 0.01, 0.03), base_len=256)
    assert base_caveat(_base_cells(-0.01, -0.06, 0.03), base_len=None) is None  # L0 unknown: nothing claimed


def test_the_caveat_opens_the_report_among_the_warnings(fx):

    data = collect(fx, None, draws=200)
    caveat = copy_distance.base_caveat(_base_cells(0.0, -0.05, 0.05), base_len=256)
    section = copy_distance.CopySection(
        cells=_base_cells(0.0, -0.05, 0.05),
        sentences=[],
        table=copy_distance.table(_base_cells(0.0, -0.05, 0.05)),
        caveat=caveat,
    )
    lines = answer_lines(data, section)
    assert f"Warning: {caveat}" in lines
    assert lines.index(f"Warning: {caveat}") > max(
        i for i, s in enumerate(lines) if not s.startswith(("Warning", "Note"))
    )


def test_the_opening_repeats_the_sections_verdicts_at_a_familywise_5_percent(fx):
    _write(fx, "fx-rope", copy_at_long=4.5, seed=0)
    _write(fx, "fx-yarn", copy_at_long=1.0, seed=1)
    write_report(fx, draws=200)
    md = fx.comparison_md.read_text()
    opening = md.split("\n## ")[0]
    assert "copy 2 comparisons, Holm within each, familywise error 5%" in opening  # the families, said once
    section = md.split("## Long-range use: copy loss by distance")[1].split("\n## ")[0]
    line = next(
        s for s in section.splitlines() if s.startswith("- continued arms at distance 216 (window 256)")
    )
    assert "vs rope +3.51" in line and "**better**" in line
    assert "their verdicts form the copy family (Methods)" in section
    assert "copy (2 comparisons): the copy section's paired differences" in md  # the Methods section


def test_too_few_records_give_no_p_value_and_no_family(fx):
    """One record with a large gain difference is no evidence: no p-value, no verdict, not in the copy family."""
    _write(fx, "fx-rope", copy_at_long=4.5, seed=0)
    _write(fx, "fx-yarn", copy_at_long=1.0, seed=1)
    for tag in ("fx-rope", "fx-yarn"):
        path = fx.eval_dir(tag) / COPY_DISTANCE_CSV
        rows = [r for r in read_rows(path, CopyRow) if r.record < 12]
        write_rows(path, rows)
    out = write_report(fx, draws=200)
    cells = out.data.copy_cells.set_index(["arm", "window"])
    yarn = cells.loc[("yarn", 256)]
    assert yarn["diff"] > 3 and pd.isna(yarn["p_holm"]) and yarn["verdict"] == Verdict.TOO_FEW_UNITS
    assert copy_distance.family(out.data.copy_cells).size == 0
    assert "too few units (n=12)" in fx.comparison_md.read_text()
    csv = pd.read_csv(fx.results_csv).set_index("tag")
    assert pd.isna(csv.loc["fx-yarn", "copy_gain_d216_p_holm_vs_rope"])
    assert csv.loc["fx-yarn", "copy_gain_d216_verdict_vs_rope"] == "too few units"
    assert (
        csv.loc["fx-yarn", "copy_gain_d216_n_units_vs_rope"] == 12
        and csv.loc["fx-yarn", "copy_gain_d216_n_units"] == 12
    )


def test_results_csv_carries_the_copy_columns(fx):
    _write(fx, "fx-rope", copy_at_long=4.5, seed=0)
    _write(fx, "fx-yarn", copy_at_long=1.0, seed=1)
    write_report(fx, draws=200)
    row = pd.read_csv(fx.results_csv).set_index("tag").loc["fx-yarn"]
    assert row["copy_gain_d216"] > 3.5 and row["copy_gain_d216_ci_low"] < row["copy_gain_d216"]
    assert row["copy_gain_d216_n_units"] == 24 and row["copy_gain_d216_n_units_vs_rope"] == 24
    assert (
        row["copy_gain_d216_diff_vs_rope (pos=better)"] > 3
        and row["copy_gain_d216_verdict_vs_rope"] == "better"
    )
    assert row["copy_gain_d216_family_vs_rope"] == "copy" and row["copy_gain_d216_p_holm_vs_rope"] <= 0.05
    assert row["copy_gain_d24_verdict_vs_rope"] == "≈ within noise" and row["copy_gain_d24_mde_vs_rope"] > 0


def test_the_opening_says_so_when_the_base_copies_within_its_training_length():
    from rlab.report.copy_distance.section import answer_lines  # noqa: PLC0415 - its `answer_lines` is another module's elsewhere here

    def cells(gain, low, high):
        return _base_cells(gain, low, high).assign(diff=np.nan, diff_low=np.nan, diff_high=np.nan, ref=None)

    (text,) = answer_lines(cells(1.5, 1.2, 1.8), base_len=256, train_len=1024)
    line = plain(text)
    assert "216 tokens back (within its training length 256) +1.50 nats/token better" in line
    assert (
        answer_lines(cells(0.02, 0.01, 0.03), base_len=256, train_len=1024) == []
    )  # the caveat says it instead
