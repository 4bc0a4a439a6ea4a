"""`rlab power` through the real entry point: a pilot's table and JSON, stated noise, user errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.harness import assert_clean_error, run_main

FX = Path(__file__).resolve().parents[1] / "report" / "fixtures" / "fx"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    shutil.copytree(FX, tmp_path / "results" / "fx")
    return tmp_path / "results"


def test_pilot_table_and_json(results):
    shown = run_main("power", "-e", "fx", "--results-dir", str(results))
    assert shown.code == 0, shown.text
    text = " ".join(shown.out.split())
    assert "primary family: m = 2" in text and "noise from pilot fx" in text and "bpb_len_512" in text
    got = run_main("power", "-e", "fx", "--results-dir", str(results), "--json", "--mde", "bpb=0.002")
    assert got.code == 0, got.text
    plan = json.loads(got.out)
    rows = {(e["endpoint"], e["family"]): e for e in plan["endpoints"]}
    primary = rows[("primary_bpb", "primary")]  # fx's primary endpoint: BPB at 4T
    assert primary["family_size"] == 2 and primary["alpha"] == pytest.approx(0.025)
    assert primary["target_mde"] == 0.01 and primary["n_units"] == 24 and primary["units_one_seed"] >= 20
    wide = rows[("bpb_len_512", "secondary")]
    assert wide["target_mde"] == 0.002 and wide["underpowered"] and wide["units_one_seed"] > 24
    assert [o["seeds"] for o in wide["by_seeds"]] == [1]  # no seed SD: only the one-seed plan


def test_stated_noise_without_a_pilot():
    got = run_main(
        "power",
        *("--unit-sd", "core=0.57", "--seed-sd", "core=0.0052", "--mde", "core=0.02", "--family-size", "8"),
        "--json",
    )
    assert got.code == 0, got.text
    (core,) = json.loads(got.out)["endpoints"]
    assert core["family_size"] == 8 and core["seed_sd"] == pytest.approx(0.0052 * 2**0.5)
    assert core["units_one_seed"] > 1000 and core["seeds_needed"] >= 2 and core["units_at_seeds_needed"] > 0
    assert "stated" in core["source"] and "run-to-run SD 0.0052" in core["seed_source"]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--unit-sd", "core=abc"], ["--unit-sd 'core=abc'", "NAME=VALUE"]),
        (["--mde", "core"], ["--mde 'core'"]),
        (["--unit-sd", "core=1", "--seeds", "0,x"], ["--seeds"]),
    ],
)
def test_user_errors(args, fragments):
    assert_clean_error(run_main("power", *args), *fragments)


def test_an_experiment_without_evals_is_no_pilot(tmp_path):
    (tmp_path / "results" / "empty" / "runs").mkdir(parents=True)
    outcome = run_main("power", "-e", "empty", "--results-dir", str(tmp_path / "results"))
    assert_clean_error(outcome, "no evals to serve as a pilot", "--unit-sd")
