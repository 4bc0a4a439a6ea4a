"""BPB: hand computation, specials and ignored targets excluded, sliding windows score each token once."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from rlab.evals.bpb import (
    evaluate_bpb,
    evaluate_bpb_by_length,
    evaluate_bpb_windows,
    plan_windows,
    resolve_lengths,
    sliding_windows,
)
from tests.evals.conftest import random_gpt


class UniformModel(torch.nn.Module):
    """Test double with uniform logits over V tokens: every target costs exactly ln V nats."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab

    def forward(self, idx, targets=None, kv_cache=None, loss_reduction="mean"):
        logits = torch.zeros(*idx.shape, self.vocab)
        return F.cross_entropy(logits.view(-1, self.vocab), targets.reshape(-1), ignore_index=-1, reduction=loss_reduction)


def test_bpb_hand_computation_excludes_specials_and_ignored():
    V = 8
    token_bytes = torch.tensor([0, 1, 2, 3, 1, 1, 4, 0])  # 0 and 7 are special tokens
    x = torch.zeros(2, 4, dtype=torch.long)
    y = torch.tensor([[1, 2, 0, 3], [6, -1, 7, 4]])
    # counted targets: 1,2,3 (row 0) and 6,4 (row 1): 5 tokens, 1+2+3+4+1 = 11 bytes
    res = evaluate_bpb(UniformModel(V), [(x, y)], 1, token_bytes)
    assert res.tokens == 5 and res.bytes == 11
    assert math.isclose(res.bpb, 5 * math.log(V) / (math.log(2) * 11), rel_tol=1e-6)  # losses are fp32


def test_bpb_matches_manual_cross_entropy_on_a_real_model():
    torch.manual_seed(0)
    model = random_gpt(300, seed=4)
    token_bytes = torch.randint(1, 5, (300,))
    token_bytes[256] = 0  # BOS-like special
    batches = [(torch.randint(0, 300, (2, 16)), torch.randint(0, 300, (2, 16))) for _ in range(3)]
    batches[1][1][0, :4] = -1
    batches[2][1][1, 3] = 256
    res = evaluate_bpb(model, batches, 3, token_bytes)
    nats = nbytes = 0.0
    units = []
    for x, y in batches:
        with torch.no_grad():
            logits = model(x)
        keep = (y >= 0) & (token_bytes[y.clamp(min=0)] > 0)
        ce = F.cross_entropy(logits[keep], y[keep], reduction="sum").item()
        b = token_bytes[y[keep]].sum().item()
        units.append((ce, b))
        nats, nbytes = nats + ce, nbytes + b
    assert math.isclose(res.bpb, nats / (math.log(2) * nbytes), rel_tol=1e-5)
    for (un, ub), (en, eb) in zip(res.units, units):
        assert math.isclose(un, en, rel_tol=1e-5) and ub == eb
    lo, hi = res.ci()
    assert lo < res.bpb < hi


class RecordingUniformModel(UniformModel):
    """UniformModel that also keeps every (inputs, targets) batch it was given."""

    def __init__(self, vocab: int) -> None:
        super().__init__(vocab)
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, idx, targets=None, kv_cache=None, loss_reduction="mean"):
        self.calls.append((idx.clone(), targets.clone()))
        return super().forward(idx, targets, kv_cache, loss_reduction)


@pytest.mark.parametrize("n,L", [(5, 4), (6, 4), (9, 4), (10, 4), (11, 4), (33, 8), (40, 7), (100, 16), (17, 16), (16, 16)])
def test_sliding_windows_score_each_target_once_with_half_window_context(n, L):
    S = L // 2
    wins = sliding_windows(n, L)
    targets = [p + 1 for b, e, s in wins for p in range(s, e)]  # position p predicts token p + 1
    if n < L + 1:
        assert wins == []
        return
    assert len(targets) == len(set(targets))  # each target at most once
    assert targets == list(range(L - S + 1, L - S + 1 + len(targets)))  # contiguous after the unscored head
    assert n - 1 - targets[-1] < S  # only a tail shorter than one stride is left unscored
    for k, (b, e, s) in enumerate(wins):
        assert b == k * S and e - b == L and e + 1 <= n  # full window with its last target in the doc
        assert e - s == S  # the last S positions are scored
        for p in range(s, e):
            assert L / 2 <= p - b <= L - 1  # tokens of left context inside the window


def test_plan_spreads_budget_round_robin_and_skips_short_docs():
    L, S = 8, 4
    plan = plan_windows([5, 40, 8, 100, 30], L, token_budget=30)
    assert plan.short_docs == [0, 2] and plan.usable_docs == 3 and plan.stride == S
    # round 0 takes window 0 of docs 1, 3, 4; round 1 window 1 of each; round 2 stops at the budget
    assert [(w.doc, w.begin) for w in plan.windows] == [
        (1, 0), (3, 0), (4, 0), (1, 4), (3, 4), (4, 4), (1, 8), (3, 8)
    ]
    assert plan.docs == 3 and plan.budget_met and plan.scored_positions == 32
    # a budget beyond what the documents allow takes every window of every usable document once
    full = plan_windows([5, 40, 8, 100, 30], L, token_budget=10**9)
    assert not full.budget_met
    assert len(full.windows) == len(set(full.windows)) == sum(len(sliding_windows(n, L)) for n in (40, 100, 30))
    assert plan_windows([5, 8], L, 100).windows == []  # no document has L + 1 tokens


def test_plan_is_deterministic_and_depends_only_on_lengths():
    a = plan_windows([300, 50, 1000, 20], 32, token_budget=500)
    b = plan_windows([300, 50, 1000, 20], 32, token_budget=500)
    assert a.windows == b.windows and a.docs == 3


def test_resolve_lengths():
    assert resolve_lengths(64, (0.5, 1.0, 2.0, 1.0), None) == [32, 64, 128]
    assert resolve_lengths(64, (0.5,), (100, 50, 100)) == [50, 100]


def test_windowed_bpb_hand_computation_and_scored_positions():
    """L=4, S=2 on a 9-token and a 4-token document, uniform model over V=8 tokens."""
    V, L = 8, 4
    token_bytes = torch.tensor([0, 1, 2, 3, 4, 5, 6, 1])  # token 0 is a special (BOS)
    docs = [[0, 1, 2, 3, 4, 5, 6, 7, 1], [0, 3, 3, 3]]
    model = RecordingUniformModel(V)
    metric, raw = evaluate_bpb_by_length(model, docs, [L], 100, token_bytes, pad_id=0, batch_tokens=8)
    # doc 1 (4 tokens) is too short; doc 0 has windows at 0, 2, 4 scoring targets 3,4 | 5,6 | 7,8,
    # i.e. tokens 3,4,5,6,7,1 with 3+4+5+6+1+1 = 20 bytes; tokens 1 and 2 are the unscored head
    res = raw[L]
    assert res.tokens == 6 and res.bytes == 20 and res.docs == 1
    assert math.isclose(res.nats, 6 * math.log(V), rel_tol=1e-6)
    assert math.isclose(res.bpb, 6 * math.log(V) / (math.log(2) * 20), rel_tol=1e-6)
    assert [u[1] for u in res.units] == [3 + 4, 5 + 6, 1 + 1]
    row = metric["lengths"][0]
    assert (row["docs"], row["windows"], row["stride"], row["short_docs"]) == (1, 3, 2, 1)
    # the forwards: 2 windows per batch (batch_tokens 8 / L 4), full windows, last 2 positions scored
    assert [x.shape[0] for x, _ in model.calls] == [2, 1]
    xs = torch.cat([x for x, _ in model.calls])
    ys = torch.cat([y for _, y in model.calls])
    assert xs.tolist() == [docs[0][b : b + 4] for b in (0, 2, 4)]
    assert ys.tolist() == [[-1, -1] + docs[0][b + 3 : b + 5] for b in (0, 2, 4)]


def test_windowed_bpb_equals_per_window_recompute():
    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=16, seed=5)
    token_bytes = torch.ones(300, dtype=torch.long)
    token_bytes[256] = 0
    g = torch.Generator().manual_seed(0)
    docs = [[256] + torch.randint(0, 256, (n,), generator=g).tolist() for n in (50, 9, 31)]
    L = 16
    plan = plan_windows([len(d) for d in docs], L, token_budget=10_000)
    res = evaluate_bpb_windows(model, docs, plan.windows, L, token_bytes, pad_id=256, batch_tokens=40)
    nats = 0.0
    for w in plan.windows:
        toks = torch.tensor([docs[w.doc][w.begin : w.end + 1]])
        with torch.no_grad():
            logits = model(toks[:, :-1])[0]  # (L, V)
        s = w.score_from - w.begin
        nats += F.cross_entropy(logits[s:], toks[0, 1:][s:], reduction="sum").item()
    # doc 0 (51 tokens): windows at 0, 8, .., 32 -> 5 x 8 targets; doc 2 (32 tokens): at 0, 8 -> 2 x 8;
    # the 10-token doc is too short for L = 16
    assert res.tokens == res.bytes == 56 and res.docs == 2
    assert math.isclose(res.nats, nats, rel_tol=1e-5)
    metric, raw = evaluate_bpb_by_length(model, docs, [16, 64], 10_000, token_bytes, 256, 64)
    assert [r["length"] for r in metric["lengths"]] == [16] and metric["skipped"][0]["length"] == 64
    assert "reason" in metric["skipped"][0] and "65 tokens" in metric["skipped"][0]["reason"]
    assert "stride" in metric["convention"] and math.isclose(metric["lengths"][0]["bpb"], res.bpb, rel_tol=1e-9)
    assert len(raw[16].units) == len(plan.windows)


def test_units_pair_across_models():
    """Unit i is the same window of the same text for every model: bytes agree unit by unit."""
    torch.set_num_threads(1)
    token_bytes = torch.randint(1, 4, (300,))
    token_bytes[256] = 0
    g = torch.Generator().manual_seed(1)
    docs = [[256] + torch.randint(0, 256, (n,), generator=g).tolist() for n in (70, 45, 12, 90)]
    out = []
    for seed in (1, 2):
        model = random_gpt(300, sequence_len=16, seed=seed)
        out.append(evaluate_bpb_by_length(model, docs, [8, 32], 100, token_bytes, 256, 32)[1])
    for L in (8, 32):
        a, b = out[0][L], out[1][L]
        assert len(a.units) == len(b.units) and [u[1] for u in a.units] == [u[1] for u in b.units]
        assert [u[0] for u in a.units] != [u[0] for u in b.units]
    assert out[0][8].docs == 4 and out[0][32].docs == 3  # the budget reaches every usable document
