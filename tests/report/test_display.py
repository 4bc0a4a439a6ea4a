"""What the report marks and explains: "best" only beyond noise, val BPB vs BPB-at-length disagreements,
training curves paired by seed and dropped when they carry no information, training length from continued arms."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd

from rlab.report.assemble.collect import collect
from rlab.report.build import write_report
from rlab.report.render.headline import disagreements
from rlab.report.render.length_tables import length_table
from rlab.report.render.plots import _relative_curves
from rlab.report.stats.verdicts import Verdict
from tests.report.conftest import write_run


def _scale_units(fx, tag: str, factor: float, metric_prefix: str = "") -> None:
    path = fx.eval_dir(tag) / "bpb_units.csv"
    units = pd.read_csv(path)
    hit = units["metric"].astype(str).str.startswith(metric_prefix)
    units.loc[hit, "nats"] *= factor
    units.to_csv(path, index=False)
    if metric_prefix in ("", "len_"):
        by_len = pd.read_csv(fx.eval_dir(tag) / "bpb_by_length.csv")
        by_len["bpb"] *= factor
        by_len.to_csv(fx.eval_dir(tag) / "bpb_by_length.csv", index=False)


def test_best_is_marked_only_when_it_beats_every_other_arm(fx):
    data = collect(fx, "rope", draws=300)
    lengths = sorted(set(data.bpb_length["length"].astype(int)))
    _scale_units(fx, "fx-yarn", 0.9, "len_")  # yarn 10% lower everywhere: beats rope and pi beyond noise
    clear = collect(fx, "rope", draws=300)
    assert all(clear.best.get(f"bpb_len_{L}") == "yarn" for L in lengths)
    table = length_table(clear)
    yarn_row = table.frame["arm"].tolist().index(clear.label("yarn"))
    assert {row for row, _ in table.best} == {yarn_row} and len(table.best) == len(lengths)
    # pi = yarn with unit-level noise (2%) and 0.01% worse on average: yarn is lowest, not beyond noise vs pi
    tight = pd.read_csv(fx.eval_dir("fx-yarn") / "bpb_units.csv")
    noise = np.random.default_rng(0).normal(0.0, 0.02, len(tight))
    tight["nats"] *= 1.0001 + noise - noise.mean()
    tight.to_csv(fx.eval_dir("fx-pi") / "bpb_units.csv", index=False)
    close = collect(fx, "rope", draws=300)
    assert not any(m.startswith("bpb_len_") for m in close.best)
    assert not length_table(close).best


def test_val_bpb_and_length_disagreement_is_explained(fx):
    _scale_units(fx, "fx-pi", 1.03, "val")  # pi worse on val BPB ...
    _scale_units(fx, "fx-pi", 0.95, "len_")  # ... and better at length
    data = collect(fx, "rope", draws=300)
    notes = disagreements(data)
    assert len(notes) == 1 and notes[0].startswith("val BPB and BPB at length point different ways for pi (")
    out = write_report(fx, draws=300)
    assert any(line.startswith("Note: val BPB and BPB at length") for line in out.answer)
    assert "what longer context buys" in fx.comparison_md.read_text()


def _metrics(fx, tag: str, losses: list[float]) -> None:
    """A metrics.jsonl of train records like the trainer's (the fixture's own record, step and loss changed)."""
    lines = (fx.run_dir("fx-pi") / "metrics.jsonl").read_text().splitlines()
    template = next(json.loads(line) for line in lines if '"train"' in line)
    fx.run_dir(tag).mkdir(parents=True, exist_ok=True)
    records = [{**template, "step": step, "loss": loss} for step, loss in enumerate(losses, start=1)]
    (fx.run_dir(tag) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_loss_curves_pair_seed_replicates_and_need_three_points(fx):
    runs = (
        ("fx-rope", 42, [5.0, 4.0, 3.0, 2.0]),
        ("fx-rope-seed1", 43, [6.0, 5.5, 5.0, 4.5]),
        ("fx-pi", 42, [5.1, 4.1, 3.1, 2.1]),
        ("fx-pi-seed1", 43, [6.1, 5.6, 5.1, 4.6]),
    )
    for tag, seed, losses in runs:
        variant = tag.split("-")[1]
        if not fx.eval_dir(tag).exists():  # a seed replicate evaluated like its first seed
            shutil.copytree(fx.eval_dir(f"fx-{variant}"), fx.eval_dir(tag))
            ev = json.loads(fx.eval_json(tag).read_text())
            fx.eval_json(tag).write_text(json.dumps({**ev, "tag": tag}))
        _metrics(fx, tag, losses)
        write_run(fx, tag, variant, seed=seed)

    rel = _relative_curves(collect(fx, "rope", draws=200), "train", "loss")
    pi = rel[rel["tag"].isin(["fx-pi", "fx-pi-seed1"])]
    assert pi["delta"].round(6).eq(0.1).all()  # each seed minus rope's run of the same seed, not their mean
    out = write_report(fx, draws=200)
    assert any(p.name == "loss_curves.png" for p in out.written)
    for tag in ("fx-rope", "fx-rope-seed1", "fx-pi", "fx-pi-seed1"):
        _metrics(fx, tag, [5.0, 4.0])
    out = write_report(fx, draws=200)
    assert not any(p.name == "loss_curves.png" for p in out.written)
    assert "plot loss_curves.png not drawn: no informative data for it yet" in out.data.footnotes.items


def test_one_unit_of_one_seed_shows_no_interval(fx):
    """A single unit has no variance to estimate: no interval is shown, and no verdict is given."""
    for tag in ("fx-rope", "fx-pi", "fx-yarn"):
        path = fx.eval_dir(tag) / "bpb_units.csv"
        units = pd.read_csv(path)
        units = units[(units["metric"] != "val") | (units["unit"].astype(str) == "0")]
        units.to_csv(path, index=False)
    data = collect(fx, "rope", draws=200)
    val = data.scalars.set_index(["arm", "metric"]).loc[("rope", "val_bpb")]
    assert val["n_units"] == 1 and pd.isna(val["ci_low"]) and pd.isna(val["ci_high"])
    comp = data.comparisons.set_index(["arm", "metric"]).loc[("pi", "val_bpb")]
    assert pd.isna(comp["diff_low"]) and pd.isna(comp["rel_low"]) and comp["verdict"] == Verdict.TOO_FEW_UNITS
    assert Verdict(comp["verdict"]).label(int(comp["n_units"])) == "too few units (n=1)"
    assert pd.isna(comp["p_value"]) and comp["family"] == ""  # no p-value behind 1 unit, in no family
    table = next(t for t in write_report(fx, draws=200).tables if t.title.startswith("BPB on the train"))
    assert "±" not in table.frame.set_index("arm").loc["rope", "val BPB"]
