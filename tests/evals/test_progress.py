"""Eval progress: the reporter's modes and stage arithmetic, and a real tiny eval run reporting every eval to its end."""

from __future__ import annotations

import io
import logging

import pytest
import torch
from rich.console import Console

from rlab.evals.progress import EVENT_PREFIX, ProgressDisplay, default_mode, parse_event, stages
from rlab.evals.runner import run_evals
from tests.evals.test_runner import eval_config, make_base


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_stages_map_each_loop_onto_one_scale():
    seen: list[tuple[int, int]] = []
    first, second = stages(lambda d, t: seen.append((d, t)), [100, 300])
    first(0, 7)
    first(7, 7)
    second(0, 2)
    second(1, 2)
    second(2, 2)
    assert seen == [(0, 400), (100, 400), (100, 400), (250, 400), (400, 400)]
    (empty,) = stages(lambda d, t: seen.append((d, t)), [5])
    empty(0, 0)  # a rank with nothing to do in a stage has finished it
    assert seen[-1] == (5, 5)
    assert stages(None, [1, 2]) == [None, None]


def test_log_mode_writes_a_line_per_tenth_with_eta(caplog):
    clock = FakeClock()
    with (
        caplog.at_level(logging.INFO, logger="rlab.evals.progress"),
        ProgressDisplay(mode="log", clock=clock) as display,
    ):
        progress = display.for_eval("core")
        for done in range(0, 201):
            clock.now = done * 0.5
            progress(done, 200)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 10  # 10%, 20%, ... 100%, no line for 0%
    assert lines[0] == "core: 20/200 (10%), 0:10 elapsed, ETA 1:30"
    assert lines[-1] == "core: 200/200 (100%), 1:40 elapsed, ETA 0:00"
    assert (progress.done, progress.total) == (200, 200)


def test_events_mode_is_throttled_and_parseable(capsys):
    clock = FakeClock()
    display = ProgressDisplay(mode="events", clock=clock)
    progress = display.for_eval("bpb")
    for done in range(11):
        clock.now = done * 0.2  # every 0.2 s: at most one event per 0.5 s, plus the first and the last
        progress(done, 10)
    events = [parse_event(line) for line in capsys.readouterr().err.splitlines()]
    assert events == [("bpb", 0, 10), ("bpb", 3, 10), ("bpb", 6, 10), ("bpb", 9, 10), ("bpb", 10, 10)]
    assert parse_event("2026 [rank 0] INFO x: y") is None and parse_event(EVENT_PREFIX + "{bad") is None


def test_bar_mode_draws_name_counts_and_eta_on_a_terminal():

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)
    with ProgressDisplay(mode="bar", console=console) as display:
        progress = display.for_eval("passkey")
        progress(0, 40)
        progress(40, 40)
    text = buffer.getvalue()
    assert "passkey" in text and "40/40" in text and "ETA" in text


def test_off_mode_and_other_ranks_say_nothing(capsys, caplog, monkeypatch):
    monkeypatch.setenv("RLAB_PROGRESS", "events")
    assert default_mode(rank=1) == "off" and default_mode(rank=0) == "events"
    monkeypatch.delenv("RLAB_PROGRESS")
    assert default_mode(rank=0) == "log"  # pytest's stderr is not a terminal
    with caplog.at_level(logging.INFO), ProgressDisplay(rank=3) as display:
        display.for_eval("ruler")(5, 5)
    assert capsys.readouterr().err == "" and not caplog.records


def test_a_real_eval_run_reports_every_eval_to_its_end(
    tiny_base_dir, tmp_path, bundle_copy, capsys, monkeypatch
):
    """Each eval's last event has done == total, and totals are in the eval's units (tokens, examples, trials)."""

    torch.set_num_threads(1)
    monkeypatch.setenv("RLAB_PROGRESS", "events")
    base = make_base(tiny_base_dir, tmp_path)
    cfg = eval_config(
        base, tmp_path, bundle_copy, evals=("bpb", "bpb_length", "core", "passkey", "ruler", "copy_distance")
    )
    cfg = cfg.model_copy(
        update={"eval": cfg.eval.model_copy(update={"copy_lengths": (128,), "copy_trials": 4})}
    )
    doc = run_evals(cfg)
    events = [e for e in map(parse_event, capsys.readouterr().err.splitlines()) if e is not None]
    last = {name: (done, total) for name, done, total in events}
    assert set(last) == set(cfg.eval.evals)
    assert all(done == total > 0 for done, total in last.values()), last
    firsts = {}
    for name, done, total in events:
        firsts.setdefault(name, (done, total))
        assert total == last[name][1]  # one total per eval from its first report
    assert all(done == 0 for done, _ in firsts.values()), firsts
    m = doc.metrics
    assert last["bpb"][1] == m.bpb.train.tokens + m.bpb.val.tokens
    assert last["core"][1] == sum(t.n for t in m.core.tasks.values()) == 12
    assert last["passkey"][1] == m.passkey.units and last["ruler"][1] == m.ruler.units
    assert last["bpb_length"][1] == sum(r.length for r in m.bpb_length.lengths) * m.bpb_length.units


@pytest.mark.parametrize("done,total,expected", [(0, 10, None), (10, 10, "x: 10/10 (100%)")])
def test_log_mode_first_and_last(done, total, expected, caplog):
    with caplog.at_level(logging.INFO, logger="rlab.evals.progress"):
        ProgressDisplay(mode="log").for_eval("x")(done, total)
    lines = [r.getMessage() for r in caplog.records]
    assert (lines[0].split(",")[0] if lines else None) == expected
