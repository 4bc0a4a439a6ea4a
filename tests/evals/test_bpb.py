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


@pytest.mark.parametrize("n,L,S", [(2, 4, 2), (5, 4, 2), (10, 4, 2), (11, 4, 2), (33, 8, 4), (20, 5, 1), (17, 6, 6)])
def test_sliding_windows_score_every_token_once(n, L, S):
    wins = sliding_windows(n, L, S)
    scored = [p for b, e, s in wins for p in range(s, e)]
    assert scored == list(range(n - 1))  # each prediction position exactly once, in order
    for i, (b, e, s) in enumerate(wins):
        assert 0 < e - b <= L and b <= s < e and e <= n - 1
        if i == 0:
            assert b == 0 and s == 0
        else:
            assert s - b >= L - S  # every later scored token has at least L - S tokens of context


def test_plan_windows_skips_short_docs_and_respects_budget():
    wins = plan_windows([5, 40, 100], 8, token_budget=50)
    assert {w.doc for w in wins} == {1, 2}
    scored = sum(w.end - w.score_from for w in wins)
    assert 50 <= scored < 50 + 8
    assert plan_windows([5, 8], 8, 100) == []


def test_resolve_lengths():
    assert resolve_lengths(64, (0.5, 1.0, 2.0, 1.0), None) == [32, 64, 128]
    assert resolve_lengths(64, (0.5,), (100, 50, 100)) == [50, 100]


def test_windowed_bpb_equals_per_window_recompute():
    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=16, seed=5)
    token_bytes = torch.ones(300, dtype=torch.long)
    token_bytes[256] = 0
    g = torch.Generator().manual_seed(0)
    docs = [[256] + torch.randint(0, 256, (n,), generator=g).tolist() for n in (50, 9, 31)]
    L = 16
    wins = plan_windows([len(d) for d in docs], L, token_budget=10_000)
    res = evaluate_bpb_windows(model, docs, wins, L, token_bytes, pad_id=256, batch_tokens=40)
    nats = 0.0
    for w in wins:
        toks = torch.tensor([docs[w.doc][w.begin : w.end + 1]])
        with torch.no_grad():
            logits = model(toks[:, :-1])[0]
        s = w.score_from - w.begin
        nats += F.cross_entropy(logits[s:], toks[0, 1:][s:], reduction="sum").item()
    n_targets = (len(docs[0]) - 1) + (len(docs[2]) - 1)  # the 9-token doc is too short for L=16
    assert res.tokens == n_targets and res.bytes == n_targets
    assert math.isclose(res.nats, nats, rel_tol=1e-5)
    metric, raw = evaluate_bpb_by_length(model, docs, [16, 64], 10_000, token_bytes, 256, 64)
    assert [r["length"] for r in metric["lengths"]] == [16] and metric["skipped"][0]["length"] == 64
    assert "stride" in metric["convention"] and math.isclose(metric["lengths"][0]["bpb"], res.bpb, rel_tol=1e-9)
    assert len(raw[16].units) == len(wins)
