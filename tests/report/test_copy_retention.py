"""Retention of the copy beyond L0 (gain far / the same arm's gain within L0, per record) and its own verdict."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rlab.evals.copy_distance import CSV as COPY_DISTANCE_CSV
from rlab.evals.copy_distance.records import CopyRow
from rlab.records.rows import write_rows
from rlab.report.build import write_report
from rlab.report.copy_distance import retention as ret
from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd
from rlab.report.stats.verdicts import Verdict

WITHIN, FAR = 32, 256  # windows: within L0 (32 in the fixture) and beyond it


def _recs(
    arms: dict[str, tuple[float, float]], n: int = 24, seed: int = 0, kind: str = "zero-shot", seeds: int = 1
) -> pd.DataFrame:
    """Per arm (mean gain within L0, mean gain far): per-record gains; a record's difficulty is shared by every
    arm and both distances (the nesting the eval guarantees), plus independent noise."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0.0, 0.3, size=n)
    rows = []
    for arm, (near, far) in arms.items():
        variant = arm.split(" ")[0]
        for s in range(seeds):
            for window, mean, distance in ((WITHIN, near, 16), (FAR, far, 216)):
                gains = mean * (1 + shared) + rng.normal(0.0, 0.05, size=n)
                rows += [
                    {"arm": arm, "kind": kind, "variant": variant, "seed": s, "window": window}
                    | {"distance": distance, "record": i, "gain": g}
                    for i, g in enumerate(gains)
                ]
    return pd.DataFrame(rows)


def _gains(recs: pd.DataFrame):
    def of(arm: str, window: int) -> pd.DataFrame:
        part = recs[(recs["arm"] == arm) & (recs["window"] == window)]
        return part.pivot_table(index="record", columns="seed", values="gain").dropna()

    return of


def _reference(kind: str, variant: str) -> str | None:
    return None if variant == "rope" else f"rope ({kind})"


def _decide(recs: pd.DataFrame, planned: list[ret.Planned]) -> pd.DataFrame:
    rows, tests = ret.estimate(recs, _gains(recs), planned, seed=0, draws=4000)
    family, adjusted, verdicts = vd.decide_family("copy", tests, [False] * len(tests))
    return ret.fill(rows, tests, adjusted, verdicts, family).set_index("arm")


def test_linearized_values_average_to_the_ratio_of_means():
    rng = np.random.default_rng(1)
    within, beyond = rng.uniform(1, 3, (2, 40)), rng.uniform(0, 2, (2, 40))
    ratio, psi = ret.linearized(beyond, within)
    assert ratio == pytest.approx(beyond.mean(axis=1) / within.mean(axis=1))  # per seed
    assert psi.mean(axis=1) == pytest.approx(ratio)


def test_retention_and_its_verdict_on_synthetic_per_record_gains():
    recs = _recs(
        {
            "rope (zero-shot)": (1.2, 0.42),  # keeps 0.35
            "yarn (zero-shot)": (3.0, 2.4),  # a higher level and keeps 0.8: better
            "ntk (zero-shot)": (2.0, 0.56),  # copies better within L0, keeps 0.28: the level hides it
            "dynamic-ntk (zero-shot)": (1.2, 0.43),  # keeps what rope keeps
            "pi (zero-shot)": (0.1, 0.05),  # nothing to retain
        }
    )
    planned = ret.plan(recs, _gains(recs), set(recs["arm"]), 32, _reference)
    assert sum(p.ref is not None and not p.note for p in planned) == 3  # pi: no copy; rope: the reference
    cells = _decide(recs, planned)
    for arm, expected in (("rope", 0.35), ("yarn", 0.8), ("ntk", 0.28), ("dynamic-ntk", 0.43 / 1.2)):
        assert cells.loc[f"{arm} (zero-shot)", "retention"] == pytest.approx(expected, abs=0.03)
    yarn, ntk, dyn, pi = (cells.loc[f"{a} (zero-shot)"] for a in ("yarn", "ntk", "dynamic-ntk", "pi"))
    assert yarn["verdict"] == Verdict.BETTER and yarn["diff_low"] > 0
    assert yarn["diff"] == pytest.approx(yarn["retention"] - cells.loc["rope (zero-shot)", "retention"])
    assert ntk["verdict"] == Verdict.WORSE  # a higher gain within L0 but less of it kept beyond
    assert (
        dyn["verdict"] == Verdict.WITHIN_NOISE and dyn["diff_low"] < 0 < dyn["diff_high"] and dyn["mde"] > 0
    )
    assert pi["verdict"] == Verdict.NONE and "no copy within L0" in pi["note"] and np.isnan(pi["diff"])


def test_seeds_are_the_replicate_of_a_retention_difference():
    recs = _recs({"rope (zero-shot)": (1.2, 0.42), "yarn (zero-shot)": (3.0, 2.4)}, seeds=3)
    planned = ret.plan(recs, _gains(recs), set(recs["arm"]), 32, _reference)
    rows, tests = ret.estimate(recs, _gains(recs), planned, seed=0, draws=4000)
    test = next(t for t in tests if t is not None)
    # seeds and units both carry noise: Satterthwaite df, at least the S - 1 of the seeds alone
    assert test.n_seeds == 3 and test.df >= 2 and test.method == inf.SEEDS_SKEW


def test_no_verdict_without_nested_records_or_enough_of_them_or_reach():
    recs = _recs({"rope (zero-shot)": (1.2, 0.4), "yarn (zero-shot)": (3.0, 2.4)})
    planned = ret.plan(recs, _gains(recs), {"yarn (zero-shot)"}, 32, _reference)
    assert "not nested" in planned[-1].note
    few = _recs({"rope (zero-shot)": (1.2, 0.4), "yarn (zero-shot)": (3.0, 2.4)}, n=10)
    planned = ret.plan(few, _gains(few), set(few["arm"]), 32, _reference)
    assert _decide(few, planned).loc["yarn (zero-shot)", "verdict"] == Verdict.TOO_FEW_UNITS
    assert ret.plan(recs, _gains(recs), set(recs["arm"]), 16, _reference) == []  # none within L0
    caps = {"rope (zero-shot)": {FAR: 64}}  # the reference's windows cap the context at 64 there
    blind = ret.plan(recs, _gains(recs), set(recs["arm"]), 32, _reference, caps)
    assert "rope (zero-shot) cannot attend 216 tokens back" in blind[-1].note


def _write_copy(fx, tag: str, near: float, far: float, seed: int, nested: bool = True) -> None:
    rng = np.random.default_rng(seed)
    shared = rng.normal(0.0, 0.3, size=24)
    rows = []
    for window, distance, gain in ((WITHIN, 16, near), (64, 24, (near + far) / 2), (FAR, 216, far)):
        for i in range(24):
            control = 5.0 + 0.2 * rng.standard_normal()
            g = gain * (1 + shared[i]) + 0.05 * rng.standard_normal()
            rows.append(
                CopyRow(
                    window=window,
                    distance=distance,
                    record=i,
                    control_nats=control,
                    copy_nats=control - g,
                    copy_acc=0.5,
                    tokens=31,
                )
            )
    write_rows(fx.eval_dir(tag) / COPY_DISTANCE_CSV, rows)
    path = fx.eval_json(tag)
    doc = json.loads(path.read_text())
    doc["metrics"]["copy_distance"] = {"passage": 32, "prefix": 8, "windows": [], "nested": nested}
    path.write_text(json.dumps(doc))


def test_report_shows_retention_beside_the_level(fx):
    _write_copy(fx, "fx-rope", near=2.0, far=0.6, seed=0)  # keeps 0.3
    _write_copy(fx, "fx-yarn", near=2.0, far=1.8, seed=1)  # keeps 0.9
    _write_copy(fx, "fx-pi", near=3.0, far=0.9, seed=2)  # a higher level beyond L0 than rope, same retention
    out = write_report(fx, draws=200)
    md = fx.comparison_md.read_text()
    assert "**Retention of the copy** beyond L0" in md and "| arm | d=24 (W=64) | d=216 (W=256) |" in md
    line = next(s for s in md.splitlines() if s.startswith("- continued arms, retention at distance 216"))
    assert "yarn 0.9" in line and "**better**" in line
    answer = next(s for s in out.answer if s.startswith("Retention of the copy, continued arms"))
    assert "gain at distance 216 / the same arm's gain at 16" in answer and "rope keeps 0.3" in answer
    level = next(s for s in md.splitlines() if "continued arms at distance 216" in s)
    assert "pi +0.9" in level and "**better**" in level.split("; ")[0]  # pi's level is better than rope's ...
    assert "pi 0.30 (+0.00" in answer and "**within noise (MDE" in answer  # ... but it keeps what rope keeps
    # 2 arms x (3 windows of levels + 2 windows beyond L0 of retention)
    assert "(copy family: 10 comparisons, Holm, familywise error 5%)" in answer
    assert (fx.plots_dir / "copy_distance.png").is_file()
    csv = out.data.results.set_index("tag")  # results.csv: each tag's retention, its arm's verdict vs rope
    assert csv.loc["fx-yarn", "copy_retention_d216"] == pytest.approx(0.9, abs=0.02)
    assert csv.loc["fx-yarn", "copy_retention_d216_n_units"] == 24
    assert csv.loc["fx-yarn", "copy_retention_d216_verdict_vs_rope"] == "better"
    assert csv.loc["fx-pi", "copy_retention_d216_verdict_vs_rope"] == "≈ within noise"
    assert csv.loc["fx-pi", "copy_retention_d216_mde_vs_rope"] > 0
