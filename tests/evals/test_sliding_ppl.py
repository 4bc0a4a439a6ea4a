"""YaRN sliding-window perplexity: windows as YaRN's script makes them, ppl = exp(mean of window means)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from rlab.evals.bpb_length.sliding import evaluate_sliding, sliding_windows, truncated_window
from tests.evals.conftest import random_gpt


def test_hand_computed_windows():
    # n = 10 document tokens, L = 5 (BOS + 4), stride 2
    w = sliding_windows(0, 10, 5, 2)
    assert [(x.begin, x.end, x.targets) for x in w] == [(0, 4, 4), (2, 6, 2), (4, 8, 2), (6, 10, 2)]
    assert [(x.begin, x.end, x.targets) for x in truncated_window(0, 10, 5)] == [(0, 4, 4)]


@pytest.mark.parametrize("n,length,stride", [(37, 8, 3), (100, 16, 15), (5, 32, 4), (64, 9, 8)])
def test_every_token_scored_once_when_stride_fits(n, length, stride):
    scored = []
    for w in sliding_windows(0, n, length, stride):
        assert w.end - w.begin <= length - 1 and w.targets <= w.end - w.begin
        scored += range(w.end - w.targets, w.end)
    assert scored == list(range(n))


def test_matches_a_per_window_recompute_on_a_real_model():
    torch.manual_seed(0)
    model = random_gpt(300, seed=2)
    bos = 299
    token_bytes = torch.randint(1, 4, (300,))
    token_bytes[bos] = 0
    docs = {0: torch.randint(0, 299, (70,)).tolist(), 3: torch.randint(0, 299, (45,)).tolist()}
    lengths, stride = [16, 32], 8
    results = evaluate_sliding(model, docs, [0, 3], lengths, stride, bos, token_bytes, batch_tokens=64)
    for res, L in zip(results, lengths):
        means, nats, nbytes = [], 0.0, 0.0
        for d in (0, 3):
            for w in sliding_windows(d, len(docs[d]), L, stride):
                x = torch.tensor([[bos, *docs[d][w.begin : w.end]]])
                with torch.no_grad():
                    logits = model(x)[0, :-1].double()
                targets = x[0, 1:]
                nll = F.cross_entropy(logits, targets, reduction="none")[-w.targets :]
                means.append(nll.mean().item())
                nats += nll.sum().item()
                nbytes += token_bytes[targets[-w.targets :]].sum().item()
        assert res.windows == len(means) and res.docs == 2
        assert math.isclose(res.ppl, math.exp(sum(means) / len(means)), rel_tol=1e-4)
        assert math.isclose(res.bpb, nats / nbytes / math.log(2), rel_tol=1e-4)
        assert res.tokens == len(docs[0]) + len(docs[3])
        assert [u[0] for u in res.units] == [0, 3]


def test_batching_does_not_change_the_numbers():
    model = random_gpt(300, seed=5)
    token_bytes = torch.ones(300, dtype=torch.long)
    docs = {0: torch.randint(0, 299, (50,)).tolist()}
    a = evaluate_sliding(model, docs, [0], [12], 4, 299, token_bytes, batch_tokens=12)
    b = evaluate_sliding(model, docs, [0], [12], 4, 299, token_bytes, batch_tokens=1000)
    assert math.isclose(a[0].ppl, b[0].ppl, rel_tol=1e-5)
