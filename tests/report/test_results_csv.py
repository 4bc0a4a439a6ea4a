"""results.csv: byte-identical re-runs, rows replaced never duplicated, safe under concurrent writers."""

from __future__ import annotations

import threading

import pandas as pd

from rlab.report.assemble.results_csv import format_cell, write_results_csv
from rlab.report.build import write_report


def test_rerun_gives_identical_bytes(fx):
    write_report(fx, fmt="csv", draws=200)
    first = fx.results_csv.read_bytes()
    write_report(fx, fmt="csv", draws=200)
    assert fx.results_csv.read_bytes() == first
    frame = pd.read_csv(fx.results_csv)
    assert list(frame["tag"]) == ["fx-ntk", "fx-pi", "fx-rope", "fx-yarn"]


def test_rewrite_replaces_rows_and_keeps_others(fx):
    write_report(fx, fmt="csv", draws=200)
    # a row another report wrote (e.g. for a tag whose outputs live elsewhere) is kept
    text = pd.read_csv(fx.results_csv, dtype=str, keep_default_na=False)
    extra = text.iloc[[0]].copy()
    extra["tag"] = "fx-other"
    pd.concat([text, extra]).to_csv(fx.results_csv, index=False, lineterminator="\n")
    write_report(fx, fmt="csv", draws=200)
    frame = pd.read_csv(fx.results_csv)
    assert sorted(frame["tag"]) == ["fx-ntk", "fx-other", "fx-pi", "fx-rope", "fx-yarn"]
    assert frame["tag"].is_unique


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "exp" / "results.csv"
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        row = pd.DataFrame(
            {"experiment": ["exp"], "tag": [f"t{i}"], "variant": ["rope"], "val_bpb": [1.0 + i]}
        )
        try:
            for _ in range(5):
                write_results_csv(path, row)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    frame = pd.read_csv(path)
    assert sorted(frame["tag"]) == [f"t{i}" for i in range(6)]
    assert dict(zip(frame["tag"], frame["val_bpb"], strict=True)) == {f"t{i}": 1.0 + i for i in range(6)}
    assert not list(path.parent.glob("*.tmp"))


def test_cell_format_is_canonical():
    assert format_cell(float("nan")) == "" and format_cell(None) == "" and format_cell(pd.NA) == ""
    assert format_cell(10000.0) == "10000" and format_cell(0.1) == "0.1" and format_cell(True) == "true"
    assert format_cell(1 / 3) == repr(1 / 3)
