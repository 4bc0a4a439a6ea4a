"""Copy-by-distance records: exact layout and distance, determinism, scoring on a real tiny GPT."""

from __future__ import annotations

import math

import pytest
import torch

from rlab.errors import EvalError
from rlab.evals.copy_distance import task as cd
from tests.evals.conftest import random_gpt

DOCS = [list(range(10, 400)), list(range(500, 900))]


@pytest.mark.parametrize("window", [72, 128, 300])
def test_record_repeats_the_passage_at_the_stated_distance(window):
    rec = cd.build_record(DOCS, bos=1, window=window, seed=3, index=5)
    assert len(rec.tokens) == window + 1 and rec.tokens[0] == 1
    x = rec.tokens[rec.first : rec.first + cd.PASSAGE]
    assert rec.tokens[rec.second : rec.second + cd.PASSAGE] == x
    assert rec.second - rec.first == cd.distance_of(window)
    assert rec.second + cd.PASSAGE == len(rec.tokens)  # the copy ends the window
    # the control: the same window with another passage where X first appeared, nothing else changed
    differs = [i for i, (a, b) in enumerate(zip(rec.tokens, rec.control)) if a != b]
    assert (
        len(rec.control) == len(rec.tokens)
        and differs
        and rec.first <= min(differs) <= max(differs) < rec.first + cd.PASSAGE
    )


def test_records_are_nested_across_windows():
    """The same passage, control and prefix at every window of a run, and the text before the repeat too:
    only the gap grows, so a record's gains at two distances are paired."""
    windows = (72, 128, 300)
    recs = {w: cd.build_record(DOCS, 1, w, seed=3, index=5, longest=300) for w in windows}
    longest = recs[300]
    for w, rec in recs.items():
        first, second = rec.first, rec.second
        assert rec.second - rec.first == cd.distance_of(w) and len(rec.tokens) == w + 1
        assert (
            rec.tokens[: first + cd.PASSAGE] == longest.tokens[: longest.first + cd.PASSAGE]
        )  # BOS, prefix, X
        assert rec.control[: first + cd.PASSAGE] == longest.control[: longest.first + cd.PASSAGE]  # ... and Y
        gap = rec.tokens[first + cd.PASSAGE : second]
        assert gap == longest.tokens[longest.second - len(gap) : longest.second]  # the filler's tail
        assert rec.tokens[second:] == longest.tokens[longest.second :]  # the repeat itself
    assert recs[72].tokens[recs[72].first + cd.PASSAGE : recs[72].second] == []  # no gap at all
    assert cd.build_record(DOCS, 1, 300, seed=3, index=5) == longest  # the longest window is itself
    assert cd.build_record(DOCS, 1, 128, seed=3, index=5, longest=128) != recs[128]  # nested in another run


def test_evaluated_records_share_their_passage_across_windows():
    torch.set_num_threads(1)
    model = random_gpt(1024, sequence_len=128)
    rows = cd.evaluate_copy_distance(
        model, DOCS, 1, [96, 128], records=3, seed=0, batch_tokens=512, device="cpu"
    )
    alone = cd.evaluate_copy_distance(
        model, DOCS, 1, [128], records=3, seed=0, batch_tokens=512, device="cpu"
    )
    assert [r["copy_nats"] for r in rows if r["window"] == 128] == pytest.approx(
        [r["copy_nats"] for r in alone], abs=1e-6
    )  # the longest window's records do not depend on the shorter ones


def test_records_are_deterministic_and_differ_by_index():
    a = cd.build_record(DOCS, 1, 128, seed=0, index=0)
    assert a == cd.build_record(DOCS, 1, 128, seed=0, index=0)
    assert a.tokens != cd.build_record(DOCS, 1, 128, seed=0, index=1).tokens


def test_too_short_window_and_too_short_text_say_what_to_do():
    with pytest.raises(EvalError, match="too short"):
        cd.build_record(DOCS, 1, 2 * cd.PASSAGE, seed=0, index=0)
    with pytest.raises(EvalError, match="long-document set"):
        cd.build_record([list(range(50))], 1, 128, seed=0, index=0)
    with pytest.raises(
        EvalError, match="too repetitive"
    ):  # every passage alike: no control, and no endless redraw
        cd.build_record([[7] * 400], 1, 128, seed=0, index=0)


def test_scores_per_record_and_summary():
    torch.set_num_threads(1)
    model = random_gpt(1024, sequence_len=128)
    rows = cd.evaluate_copy_distance(
        model, DOCS, 1, [96, 128], records=6, seed=0, batch_tokens=256, device="cpu"
    )
    assert [(r["window"], r["record"]) for r in rows] == [(w, i) for w in (96, 128) for i in range(6)]
    assert all(
        math.isfinite(r["control_nats"]) and math.isfinite(r["copy_nats"]) and 0 <= r["copy_acc"] <= 1
        for r in rows
    )
    again = cd.evaluate_copy_distance(
        model, DOCS, 1, [96, 128], records=6, seed=0, batch_tokens=10_000, device="cpu"
    )
    for r, s in zip(rows, again):  # batching does not change the numbers
        assert r["copy_nats"] == pytest.approx(s["copy_nats"], abs=1e-5)
    summary = cd.summarize(rows)
    assert [s["window"] for s in summary] == [96, 128] and all(s["n"] == 6 for s in summary)
    for s in summary:
        assert s["gain"] == pytest.approx(s["control_nats"] - s["copy_nats"])
        assert s["gain_ci_low"] <= s["gain"] <= s["gain_ci_high"]


def test_a_model_that_cannot_see_the_first_copy_gains_exactly_nothing():
    """The gain is measured against the control, so context the repeat gets from the filler (which a
    comparison with the first occurrence would credit to copying) cancels: a nanochat-2026 model whose
    windows (its training length, 16; two layers reach 34 back) cannot reach the first copy scores the repeat
    alike in both."""
    torch.set_num_threads(1)
    model = random_gpt(1024, sequence_len=16, architecture="nanochat-2026")
    rows = cd.evaluate_copy_distance(
        model, DOCS, 1, [128], records=4, seed=0, batch_tokens=1024, device="cpu"
    )
    assert all(r["control_nats"] == pytest.approx(r["copy_nats"], abs=1e-5) for r in rows)
    near = cd.evaluate_copy_distance(
        random_gpt(1024, sequence_len=128, architecture="nanochat-2026"),
        DOCS,
        1,
        [128],
        records=4,
        seed=0,
        batch_tokens=1024,
        device="cpu",
    )
    assert any(abs(r["control_nats"] - r["copy_nats"]) > 1e-3 for r in near)  # within reach, the copy matters
