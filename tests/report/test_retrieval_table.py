"""The retrieval table: likelihood accuracy [Wilson], mean margin [t interval] and the generation score per arm."""

from __future__ import annotations

import json

import numpy as np

from rlab.evals.passkey import CHOICES_CSV as PASSKEY_CHOICES_CSV
from rlab.evals.retrieval.records import ChoiceTrial
from rlab.records.rows import write_rows
from rlab.report.assemble.collect import collect
from rlab.report.build import write_report
from rlab.report.render.retrieval import retrieval_table
from rlab.report.render.tables import all_tables


def add_choices(fx, tag: str, margins: dict[int, list[float]]) -> None:
    rows = [
        ChoiceTrial(
            task="passkey",
            length=L,
            depth=0.5,
            trial=t,
            right_logp=-1.0 + m,
            best_other_logp=-1.0,
            margin=m,
            correct=int(m > 0),
        )  # fmt: skip
        for L, ms in margins.items()
        for t, m in enumerate(ms)
    ]
    write_rows(fx.eval_dir(tag) / PASSKEY_CHOICES_CSV, rows)
    path = fx.eval_json(tag)
    doc = json.loads(path.read_text())
    n = len(rows)
    doc["metrics"]["passkey"]["likelihood"] = {
        "scoring": "likelihood",
        "choices": 10,
        "chance": 0.1,
        "accuracy": sum(r.correct for r in rows) / n,
        "margin": sum(r.margin for r in rows) / n,
        "n": n,
        "by_length": [],
    }
    path.write_text(json.dumps(doc))


def test_no_table_without_likelihood_scores(fx):
    assert retrieval_table(collect(fx, "rope", draws=200)) is None


def test_cells_carry_wilson_accuracy_and_studentized_margin(fx):
    rope = {64: [0.5] * 15 + [-0.2] * 5, 128: [-0.1] * 20}
    yarn = {64: [0.3] * 20, 128: [0.2] * 10 + [-0.2] * 10}
    add_choices(fx, "fx-rope", rope)
    add_choices(fx, "fx-yarn", yarn)
    table = retrieval_table(collect(fx, "rope", draws=200))
    assert table is not None and list(table.frame.columns) == ["arm", "eval", "L=64", "L=128"]
    frame = table.frame.set_index("arm")
    cell = frame.loc["rope", "L=64"]
    margins = np.array(rope[64])
    half = 2.093 * margins.std(ddof=1) / np.sqrt(20)  # t(19) 97.5%
    assert cell.startswith(f"0.75 [0.53, 0.89], margin {margins.mean():+.2f} ")
    assert f"[{margins.mean() - half:+.2f}, {margins.mean() + half:+.2f}]" in cell and cell.endswith("(n=20)")
    assert frame.loc["yarn", "L=128"].startswith("0.50 [0.30, 0.70], margin +0.00")
    assert "chance 0.10" in table.caption
    assert "Retrieval: likelihood beside generation" in [
        t.title for t in all_tables(collect(fx, "rope", draws=200))
    ]
    report = write_report(fx, baseline="rope", draws=200)
    assert "Retrieval: likelihood beside generation" in fx.comparison_md.read_text()
    assert report.document is not None


def test_a_choices_file_breaking_its_contract_is_a_footnote(fx):
    (fx.eval_dir("fx-rope") / PASSKEY_CHOICES_CSV).write_text("task,length\npasskey,64\n")
    data = collect(fx, "rope", draws=200)
    assert retrieval_table(data) is None
    assert any("passkey_choices.csv" in n for n in data.footnotes.items)
