"""experiments/probes/induction.py: its windows hold exactly one repeat, and it runs and reports a gain per window."""

from __future__ import annotations

import json

import torch

from tests.conftest import load_probe


def test_each_window_repeats_its_passage_at_a_varying_distance():
    probe = load_probe("induction")
    rows, first, repeat = probe.copy_windows(256, 32, 64, torch.Generator().manual_seed(1))
    targets = rows[:, 1:]
    assert (rows[:, 0] == probe.BOS).all()
    distances = set()
    for i in range(rows.size(0)):
        assert first[i].sum() == repeat[i].sum() >= 7  # passages of 8-16 tokens, scored after their first
        assert torch.equal(targets[i][first[i]], targets[i][repeat[i]])
        distances.add(int(repeat[i].nonzero()[0]) - int(first[i].nonzero()[0]))
    assert len(distances) > 10  # a fixed distance would be solved by a positional head


def test_the_probe_trains_and_prints_the_gain_by_window(capsys):
    load_probe("induction").main(["--phases", "16:2", "--width", "64"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["step"] == 2 and report["trained_at"] == 16
    assert set(report["copy_gain_by_window"]) == {"32", "64", "128", "256", "512"}


def test_the_fixed_layout_repeats_half_a_window_back():
    rows, first, repeat = load_probe("induction").copy_windows(
        32, 4, 64, torch.Generator().manual_seed(0), fixed=True
    )
    assert (repeat.float().argmax(1) - first.float().argmax(1) == 16).all()
    assert torch.equal(rows[:, 1:17], rows[:, 17:33])
