"""The report's frames from the hand-written fixture experiment, compared exactly."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from rlab.report.assemble.collect import collect
from rlab.report.assemble.wide import column_key, order_columns
from rlab.report.render.length_tables import length_table
from rlab.report.render.markdown import md_table
from rlab.report.render.tables import block, core_table, core_task_table, passkey_table
from rlab.report.stats import inference as inf

# Hand-computed from the fixture files (see tests/report/fixtures/fx).
PK = {  # passkey accuracy per length, mean over the 3 depths
    "fx-pi": [1.0, 2.75 / 3, 2.0 / 3, 1.25 / 3],
    "fx-rope": [1.0, 2.75 / 3, 0.5 / 3, 0.0],
    "fx-yarn": [1.0, 1.0, 2.75 / 3, 2.0 / 3],
}
NOTES = {
    "fx-ntk": "fx-ntk: not evaluated yet (no eval.json)",
    "fx-pi": "fx-pi: partial CORE (missing: arc_easy)",
    "fx-rope": "",
    "fx-yarn": "",
}


def expected_points() -> pd.DataFrame:
    nan = math.nan
    tags = ["fx-ntk", "fx-pi", "fx-rope", "fx-yarn"]
    n24 = pd.array([None, 24, 24, 24], dtype="Int64")
    frame = pd.DataFrame(
        {
            "experiment": ["fx"] * 4,
            "tag": tags,
            "variant": ["ntk", "pi", "rope", "yarn"],
            "arm": ["ntk", "pi", "rope", "yarn"],
            "kind": ["continued"] * 4,
            "rope_base": [nan, 10000.0, 10000.0, 10000.0],
            "rope_factor": [nan, 4.0, 1.0, 4.0],
            "rope_original_len": [nan, 32.0, 32.0, 32.0],
            "n_seeds": pd.array([1, 1, 1, 1], dtype="Int64"),
            "step": pd.array([4, 10, 10, 10], dtype="Int64"),
            "train_seq_len": pd.array([128, 128, 128, 128], dtype="Int64"),
            "tokens_trained": pd.array([None, 5120, 5120, 5120], dtype="Int64"),
            "last_train_loss": [2.6411, 2.3939, 2.3739, 2.3639],
            # the primary endpoint: the extension, BPB at 2x and 4x the training length (256, 512) minus BPB
            # at it (128), mean over both
            "extension_bpb": [nan, (0.04 + 0.19) / 2, (0.50 + 1.20) / 2, (0.02 + 0.09) / 2],
            "extension_bpb_n_units": n24,
            "train_bpb": [nan, 1.46, 1.45, 1.44],
            "train_bpb_n_units": n24,
            "val_bpb": [nan, 1.48, 1.47, 1.455],
            "val_bpb_n_units": n24,
            "bpb_len_64": [nan, 1.52, 1.50, 1.49],
            "bpb_len_128": [nan, 1.41, 1.40, 1.38],
            "bpb_len_256": [nan, 1.45, 1.90, 1.40],
            "bpb_len_512": [nan, 1.60, 2.60, 1.47],
            "bpb_len_512_n_units": n24,  # 48 blocks, two per document: 24 independent units
            "core": [nan, 0.354167, 0.270833, 0.708333],
            "core_n_units": pd.array([None, 16, 16, 16], dtype="Int64"),
            "core_partial": pd.array([None, True, False, False], dtype="boolean"),
            "core_missing_tasks": ["", "arc_easy", "", ""],
            "passkey_overall": [nan, 9 / 12, 6.25 / 12, 10.75 / 12],
            "passkey_overall_n_units": pd.array([None, 48, 48, 48], dtype="Int64"),  # 16 cells x 3 keys
            **{
                f"passkey_len_{L}": [nan] + [PK[t][i] for t in tags[1:]]
                for i, L in enumerate((64, 128, 256, 512))
            },
            "val_bpb_rel_vs_rope_pct (neg=better)": [nan, 0.01 / 1.47 * 100, nan, -0.015 / 1.47 * 100],
            "val_bpb_verdict_vs_rope": ["", "worse", "", "better"],
            "bpb_len_128_verdict_vs_rope": ["", "worse", "", "better"],
            "bpb_len_512_rel_vs_rope_pct (neg=better)": [nan, -1.0 / 2.6 * 100, nan, -1.13 / 2.6 * 100],
            "bpb_len_512_verdict_vs_rope": ["", "better", "", "better"],
            "extension_bpb_diff_vs_rope (neg=better)": [nan, 0.115 - 0.85, nan, 0.055 - 0.85],
            "extension_bpb_verdict_vs_rope": ["", "better", "", "better"],
            "core_diff_vs_rope (pos=better)": [nan, 0.354167 - 0.270833, nan, 0.708333 - 0.270833],
            "core_verdict_vs_rope": ["", "too few units", "", "too few units"],
            "notes": [NOTES[t] for t in tags],
        }
    )
    return frame


def test_results_frame_points_match_hand_computation(fx):
    data = collect(fx, "rope", draws=500)
    expected = expected_points()
    got = data.results[list(expected.columns)]
    assert_frame_equal(got, expected, check_dtype=True, rtol=1e-5)


def test_long_frames_match_fixture_files(fx):
    data = collect(fx, "rope", draws=300)
    bl = data.bpb_length
    assert list(bl.columns) == ["tag", "variant", "length", "bpb", "ci_low", "ci_high", "tokens", "docs"]
    got = bl[bl["tag"] == "fx-yarn"][["length", "bpb", "tokens", "docs"]].reset_index(drop=True)
    expected = pd.DataFrame(
        {
            "length": [64, 128, 256, 512],
            "bpb": [1.49, 1.38, 1.40, 1.47],
            "tokens": [256.0, 512.0, 1024.0, 2048.0],
            "docs": [4.0, 4.0, 4.0, 4.0],
        }
    )
    assert_frame_equal(got, expected)

    ct = data.core_tasks
    got = ct[ct["tag"] == "fx-rope"][["task", "type", "accuracy", "centered", "baseline", "n"]].reset_index(
        drop=True
    )
    expected = pd.DataFrame(
        {
            "task": ["hellaswag_zeroshot", "lambada_openai"],
            "type": ["multiple_choice", "language_modeling"],
            "accuracy": [0.375, 0.375],
            "centered": [0.166667, 0.375],
            "baseline": [0.25, 0.0],
            "n": [8.0, 8.0],
        }
    )
    assert_frame_equal(got, expected, check_dtype=False)
    # yarn's per-task CSV is missing: its tasks come from eval.json instead.
    assert sorted(ct[ct["tag"] == "fx-yarn"]["task"]) == ["hellaswag_zeroshot", "lambada_openai"]

    curves = data.curves
    train = curves[(curves["tag"] == "fx-ntk") & (curves["type"] == "train")]
    assert list(train["step"]) == [1, 2, 3, 4]  # the torn last line (step 5) is skipped
    ev = curves[(curves["tag"] == "fx-rope") & (curves["type"] == "eval")]
    assert_frame_equal(
        ev[["step", "val_bpb"]].reset_index(drop=True),
        pd.DataFrame({"step": [0, 5, 10], "val_bpb": [1.60, 1.475, 1.35]}),
    )


def test_intervals_bracket_the_estimates_and_are_deterministic(fx):
    a = collect(fx, "rope", seed=3, draws=300)
    b = collect(fx, "rope", seed=3, draws=300)
    assert_frame_equal(a.scalars, b.scalars)
    assert_frame_equal(a.comparisons, b.comparisons)
    boot = a.scalars[a.scalars["interval"] == "t"]
    assert len(boot) == 3 * 9  # primary, extension, train, val, 4 lengths, core for each evaluated tag
    assert (boot["ci_low"] <= boot["value"] + 1e-12).all() and (
        boot["value"] <= boot["ci_high"] + 1e-12
    ).all()
    comp = a.comparisons[a.comparisons["interval"] == "t"]
    assert len(comp) and ((comp["diff_low"] <= comp["diff"]) & (comp["diff"] <= comp["diff_high"])).all()
    c = collect(fx, "rope", seed=4, draws=300)
    assert_frame_equal(c.scalars, a.scalars)  # studentized intervals: no resampling, the seed plays no part
    mc = a.comparisons["method"] == inf.SKEW_MC  # p resolves to 1 / (draws + 1), never 0
    assert mc.any() and (a.comparisons.loc[mc, "p_value"] >= 1 / 301 - 1e-15).all()


def test_core_interval_uses_the_contracts_fraction_baselines(fx):
    """eval.json's CORE tasks carry baselines as fractions (`rlab.evals.core.records.CoreTask`); the bootstrap must
    reproduce eval.json's CORE, which it only does with the fraction."""
    data = collect(fx, "rope", draws=200)
    core = data.scalars[(data.scalars["metric"] == "core")].set_index("arm")
    for arm, value in (("rope", 0.270833), ("pi", 0.354167), ("yarn", 0.708333)):
        assert core.loc[arm, "value"] == pytest.approx(value, abs=1e-6)
        assert core.loc[arm, "ci_low"] < value < core.loc[arm, "ci_high"]


def test_other_baseline_changes_column_names_and_signs(fx):
    data = collect(fx, "yarn", draws=300)
    cols = data.results.columns
    assert "val_bpb_rel_vs_yarn_pct (neg=better)" in cols
    assert not any("_vs_rope" in c for c in cols)
    row = data.results.set_index("tag").loc["fx-rope"]
    assert row["val_bpb_verdict_vs_yarn"] == "worse"
    assert row["bpb_len_512_rel_vs_yarn_pct (neg=better)"] == pytest.approx(1.13 / 1.47 * 100, rel=1e-6)


def test_column_order_is_stable_whatever_the_input_order(fx):
    cols = list(collect(fx, "rope", draws=200).results.columns)
    shuffled = list(reversed(cols))
    assert order_columns(shuffled) == cols
    assert cols[:5] == ["experiment", "tag", "variant", "arm", "kind"] and cols[-1] == "notes"
    assert cols.index("bpb_len_64") < cols.index("bpb_len_512") < cols.index("core")
    # numeric, not lexicographic, order of lengths
    assert column_key("bpb_len_1024") > column_key("bpb_len_512")


def test_tables_mark_best_only_when_significant(fx):

    data = collect(fx, "rope", draws=500)
    lt = length_table(data)
    assert list(lt.frame["arm"]) == ["rope", "pi [2]", "ntk [1]", "yarn"]  # baseline first, then spec order
    assert list(lt.frame.columns) == ["arm", "64", "128 (train)", "256", "512"]
    assert lt.best == {(3, "64"), (3, "128 (train)"), (3, "256"), (3, "512")}  # yarn: better and lowest
    assert core_table(data).best == set()  # yarn's CORE is highest, but on 16 examples: no verdict, no bold
    pk = passkey_table(data)
    cell = pk.frame.set_index("arm").loc["rope", "256"]
    assert cell.startswith("0.17 [") and cell.endswith("n=12")  # accuracy [Wilson interval] n=keys
    assert "best" not in core_task_table(data).frame.columns
    md = "\n".join(md_table(block(lt)))
    assert md.splitlines()[1] == "|:---|---:|---:|---:|---:|"
    assert "| yarn | **1.490 ± 0.0" in md
