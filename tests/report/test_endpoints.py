"""The primary endpoint is one the models can express: the extension beyond the training length, capped lengths
left out and labelled, and dynamic-ntk's frequencies along the curves stated."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rlab.report.assemble.collect import collect
from rlab.report.build import write_report
from rlab.report.render.document import plain
from rlab.report.render.headline import sentence, warnings
from rlab.report.render.length_tables import length_change_table, length_table
from rlab.report.stats import estimates as est

CONTINUED = ("fx-rope", "fx-pi", "fx-yarn")


def _edit(fx, tag: str, edit) -> None:
    path = fx.eval_json(tag)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _attention(caps: dict[int, int | None], rule: str = "capped") -> dict:
    return {
        "rule": rule,
        "windowed": True,
        "sequence_len": 128,
        "lengths": [
            {"length": L, "windows": [cap or L, cap or L], "capped_at": cap}
            for L, cap in sorted(caps.items())
        ],
    }


def test_extension_units_give_the_difference_of_bpb_at_two_lengths(fx):
    data = collect(fx, "rope", draws=300)
    assert data.primary.metric == est.PRIMARY and data.primary.lengths == [512]  # the level at 4T is primary
    assert data.primary.extension == [256, 512] and data.primary.reference == 128 and not data.primary.note
    units = pd.read_csv(fx.eval_dir("fx-yarn") / "bpb_units.csv")
    by = {m: g.set_index("unit") for m, g in units.groupby("metric")}
    per_length = [
        (by[f"len_{L}"]["nats"] - by["len_128"]["nats"]).sum() / (np.log(2) * by["len_128"]["bytes"].sum())
        for L in (256, 512)
    ]
    yarn = data.scalars.set_index(["arm", "metric"]).loc[("yarn", est.EXTENSION)]
    assert yarn["value"] == pytest.approx(np.mean(per_length), rel=1e-9)
    assert yarn["ci_low"] < yarn["value"] < yarn["ci_high"] and yarn["n_units"] == 24  # documents
    comp = data.comparisons.set_index(["arm", "metric"]).loc[("yarn", est.EXTENSION)]
    assert comp["family"] == "secondary" and np.isnan(comp["rel_pct"])  # no percent of a difference
    assert data.comparisons.set_index(["arm", "metric"]).loc[("yarn", est.PRIMARY), "family"] == "primary"
    assert "extension_bpb_rel_vs_rope_pct (neg=better)" not in data.results.columns


def test_capped_lengths_are_left_out_of_the_primary_and_labelled(fx):
    for tag in CONTINUED:
        _edit(fx, tag, lambda d: d.update(attention=_attention({64: None, 128: None, 256: None, 512: 128})))
    data = collect(fx, "rope", draws=300)
    assert data.primary.metric == est.PRIMARY and data.primary.lengths == [256]
    assert data.primary.capped == {512: sorted(CONTINUED)}
    assert any("left out 512 tokens" in w for w in warnings(data))
    cells = length_table(data).frame.set_index("arm")
    assert cells.loc["yarn", "512"].endswith("(capped at 128)") and "capped" not in cells.loc["yarn", "256"]
    change = length_change_table(data).frame.set_index("arm")
    assert change.loc["yarn", "512"].endswith("(capped at 128)")
    assert "cannot attend to" in length_table(data).about
    out = write_report(fx, draws=200)  # the headline plot marks the capped points
    assert any(p.name == "bpb_vs_length.png" for p in out.written)


def test_no_attendable_length_past_training_falls_back_to_the_level_and_says_why(fx):
    for tag in CONTINUED:
        _edit(fx, tag, lambda d: d.update(attention=_attention({128: None, 256: 128, 512: 128})))
    out = write_report(fx, draws=300)
    data = out.data
    assert data.primary.metric == est.PRIMARY and data.primary.lengths == [128] and data.primary.note
    assert "a level, not an extension" in data.primary.description
    assert any("attention_windows: extend" in line for line in out.answer)
    assert "**Answer** (primary endpoint: BPB at 128 tokens" in fx.comparison_md.read_text()


def test_evals_that_do_not_record_their_windows_give_no_extension(fx):
    """An eval.json from before rlab recorded attention windows cannot show that 2T was seen as 2T of context."""
    _edit(fx, "fx-pi", lambda d: d.pop("attention"))
    data = collect(fx, "rope", draws=300)
    assert data.primary.metric == est.PRIMARY and data.primary.lengths == [128]
    assert "fx-pi does not record its attention windows" in data.primary.note


def test_dynamic_ntk_curves_are_annotated_with_their_scale_per_length(fx):
    def to_dynamic(doc: dict) -> None:
        doc["variant"] = "dynamic-ntk"
        doc["rope"] = {**doc["rope"], "variant": "dynamic-ntk"}
        doc["rope_eval"] = {"variant": "dynamic-ntk", "dynamic_ntk": "per_window"}

    _edit(fx, "fx-yarn", to_dynamic)
    data = collect(fx, "rope", draws=300)
    note = next(
        n for n in data.footnotes.items if n.startswith("fx-yarn: dynamic-ntk is evaluated per window")
    )
    # s = 4, L0 = 32: scale s*L/L0 - (s-1) = 5 at 64, 13 at 128 (where it trained), 29 at 256, 61 at 512
    assert "effective scale 5 at 64, 13 at 128, 29 at 256, 61 at 512" in note
    assert "it trained at 128 tokens, i.e. at scale 13" in note
    assert data.label("dynamic-ntk").endswith(f"[{data.footnotes.items.index(note) + 1}]")


def test_the_answer_leads_with_the_level_and_explains_it_by_the_extension(fx):
    """A worse arm can lose less from more context without using it better: the level at the longest length is the
    verdict, the extension stands beside it, and an arm that "extends better" only because it predicts worse at
    every length is called out."""

    data = collect(fx, "rope", draws=300)
    for arm in ("pi", "yarn"):
        line = plain(sentence(data, arm))
        level = data.comparisons.set_index(["arm", "metric"]).loc[(arm, est.PRIMARY)]
        assert f"{level['rel_pct']:+.2f}%" in line and line.index("BPB,") < line.index("extension from 128")
        ext = data.comparisons.set_index(["arm", "metric"]).loc[(arm, est.EXTENSION)]
        only_because = "only because it predicts worse" in line
        assert only_because == (ext["verdict"] == "better" and level["diff"] > 0)
