"""BPB: hand computation, specials and ignored targets excluded; BPB vs length scores the same targets at every length."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import rlab.evals.bpb.score as bpb_mod
from rlab.errors import EvalError
from rlab.evals.bpb.score import doc_windows, score_documents
from rlab.evals.bpb_length.same_targets import (
    Block,
    bigram_repeats,
    evaluate_bpb_blocks,
    evaluate_bpb_by_length,
    plan_blocks,
    score_plan,
)
from rlab.spec.rope import RopeSpec
from tests.evals.conftest import random_gpt


class UniformModel(torch.nn.Module):
    """Test double with uniform logits over V tokens: every target costs exactly ln V nats."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab

    def forward(self, idx, targets=None, kv_cache=None, loss_reduction="mean"):
        logits = torch.zeros(*idx.shape, self.vocab)
        return F.cross_entropy(
            logits.view(-1, self.vocab), targets.reshape(-1), ignore_index=-1, reduction=loss_reduction
        )


def _docs(lengths, seed=0, vocab=256, bos=256):
    g = torch.Generator().manual_seed(seed)
    return [[bos] + torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


def test_doc_windows_cover_every_target_once():
    for n, w in [(2, 4), (5, 4), (9, 4), (10, 4), (1, 3)]:
        targets = [t for s, e in doc_windows(n, w) for t in range(s + 1, e)]
        assert targets == list(range(1, n)) and all(e - s - 1 <= w for s, e in doc_windows(n, w))


def test_documents_match_manual_cross_entropy_and_exclude_specials():
    """Each document is scored in windows of W targets; nats and bytes per document equal a by-hand forward."""
    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=16, seed=4)
    token_bytes = torch.randint(1, 5, (300,))
    token_bytes[256] = token_bytes[7] = 0  # BOS and another special: neither nats nor bytes
    docs = _docs((40, 3, 17, 1))
    docs[0][5] = 7
    res = score_documents(model, docs, 16, token_bytes, batch_tokens=48)
    assert len(res.units) == 4 and res.docs == 4
    total_n = total_b = 0.0
    for doc, (un, ub, ut) in zip(docs, res.units):
        nats = nbytes = count = 0.0
        for s, e in doc_windows(len(doc), 16):
            x, y = torch.tensor([doc[s : e - 1]]), torch.tensor(doc[s + 1 : e])
            with torch.no_grad():
                logits = model(x)[0]
            keep = token_bytes[y] > 0
            nats += F.cross_entropy(logits[keep], y[keep], reduction="sum").item()
            nbytes += token_bytes[y[keep]].sum().item()
            count += keep.sum().item()
        assert math.isclose(un, nats, rel_tol=1e-5) and ub == nbytes and ut == count
        total_n, total_b = total_n + nats, total_b + nbytes
    assert math.isclose(res.bpb, total_n / (math.log(2) * total_b), rel_tol=1e-5)


@pytest.mark.parametrize("variant", ["rope", "dynamic-ntk"])
def test_documents_are_invariant_to_batch_size_and_rank_split(monkeypatch, variant):
    """Same per-document sums (1e-6 relative, fp32) at any batch size and any split across ranks."""

    torch.set_num_threads(1)
    rope = RopeSpec(variant=variant, factor=2.0) if variant != "rope" else None
    model = random_gpt(300, sequence_len=16, seed=3, rope=rope)
    token_bytes = torch.randint(1, 4, (300,))
    token_bytes[256] = 0
    docs = _docs((70, 5, 33, 16, 17, 2, 48), seed=2)
    ref = score_documents(model, docs, 32, token_bytes, batch_tokens=32)  # one window per forward
    for batch_tokens in (64, 500):
        other = score_documents(model, docs, 32, token_bytes, batch_tokens=batch_tokens)
        assert math.isclose(other.nats, ref.nats, rel_tol=1e-6) and other.bytes == ref.bytes
    for world in (2, 3):
        per_doc = [[0.0, 0.0, 0] for _ in docs]
        for rank in range(world):
            monkeypatch.setattr(bpb_mod, "rank_and_world", lambda r=rank, w=world: (r, w))
            part = score_documents(model, docs, 32, token_bytes, batch_tokens=96)
            for i, (n, b, t) in enumerate(part.units):
                per_doc[i] = [per_doc[i][0] + n, per_doc[i][1] + b, per_doc[i][2] + t]
        assert all(
            math.isclose(a[0], b[0], rel_tol=1e-6) and a[1] == b[1] and a[2] == b[2]
            for a, b in zip(per_doc, ref.units)
        )
        assert math.isclose(math.fsum(u[0] for u in per_doc), ref.nats, rel_tol=1e-6)


class RecordingUniformModel(UniformModel):
    """UniformModel that also keeps every (inputs, targets) batch it was given."""

    def __init__(self, vocab: int) -> None:
        super().__init__(vocab)
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, idx, targets=None, kv_cache=None, loss_reduction="mean"):
        self.calls.append((idx.clone(), targets.clone()))
        return super().forward(idx, targets, kv_cache, loss_reduction)


def scored_targets(model: RecordingUniformModel, docs) -> list[tuple[int, int, int]]:
    """(document token index of the target, its left context in the window, window length) of every
    scored target, recovered from the forwards by locating each window in the documents."""
    out = []
    for x, y in model.calls:
        L = x.shape[1]
        for xr, yr in zip(x.tolist(), y.tolist()):
            starts = [
                (d, s) for d, doc in enumerate(docs) for s in range(len(doc) - L) if doc[s : s + L] == xr
            ]
            assert len(starts) == 1, "test documents must make every window unique"
            d, s = starts[0]
            for p, t in enumerate(yr):
                if t >= 0:
                    assert docs[d][s + p + 1] == t  # position p predicts token p + 1
                    out.append(((d, s + p + 1), p, L))
    return out


def distinct_docs(lengths, seed=0) -> list[list[int]]:
    """Documents whose windows are unique (tokens drawn from a large vocabulary)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 10**6, (n,), generator=g).tolist() for n in lengths]


class RecordingUnitLoss(RecordingUniformModel):
    """Records its batches and costs 1 nat per target, without materialising logits over a big vocabulary."""

    def forward(self, idx, targets=None, kv_cache=None, loss_reduction="mean"):
        self.calls.append((idx.clone(), targets.clone()))
        return (targets >= 0).float().reshape(-1)


@pytest.mark.parametrize(
    "lengths,block", [((8, 16, 32), None), ((8, 12, 32), 3), ((4, 5, 9), 1), ((6, 30), 6)]
)
def test_every_length_scores_the_same_targets_once_with_full_context(lengths, block):
    docs = distinct_docs([40, 90, 33, 7, 61])
    model = RecordingUnitLoss(10**6)
    metric, raw = evaluate_bpb_by_length(
        model, docs, lengths, 150, torch.ones(10**6, dtype=torch.long), 64, block
    )
    seen = scored_targets(model, docs)
    B = block or min(lengths) // 2
    ref = sorted(t for t, _, L in seen if L == lengths[0])
    assert len(ref) == len(set(ref)) > 0 and len(ref) % B == 0
    for L in lengths:
        got = [(t, ctx) for t, ctx, n in seen if n == L]
        assert sorted(t for t, _ in got) == ref  # same targets at every length, each once
        assert all(L - B <= ctx <= L - 1 for _, ctx in got)  # (almost) the full window of left context
        assert raw[L].tokens == len(ref) and raw[L].nats == len(ref)
    # every target is late enough in its document for the longest window: index >= L_k - B + 1
    assert all(t >= max(lengths) - B + 1 for _, t in ref)


def test_hand_computed_tiny_case():
    """Lengths 4 and 6, B = 2, a 10-token and a 5-token document, uniform model over V = 8."""
    V = 8
    token_bytes = torch.tensor([0, 1, 2, 3, 4, 5, 6, 1])  # token 0 is a special (BOS)
    docs = [[0, 1, 2, 3, 4, 5, 6, 7, 1, 2], [0, 3, 3, 3, 3]]
    model = RecordingUniformModel(V)
    metric, raw = evaluate_bpb_by_length(model, docs, [6, 4], 100, token_bytes, batch_tokens=12)
    # L_k = 6, B = 4 // 2 = 2; doc 1 (5 tokens) cannot hold a 6-token window plus its target.
    # No document has 2 L_k + 1 = 13 tokens, so blocks start at L_k + 1 (no window sees the BOS): ends e = 7, 9:
    # targets tokens 6..7 and 8..9 of doc 0, i.e. 6,7 | 1,2 -> 7 | 3 bytes.
    assert metric["block"] == 2 and metric["longest"] == 6 and metric["skipped"] == []
    assert metric["start"] == 7 and metric["document_start_in_view"] is True
    for L in (4, 6):
        res = raw[L]
        assert res.tokens == 4 and res.bytes == 10 and res.docs == 1
        assert [u[1] for u in res.units] == [6 + 1, 1 + 2]
        assert math.isclose(res.bpb, 4 * math.log(V) / (math.log(2) * 10), rel_tol=1e-6)
    rows = {r["length"]: r for r in metric["lengths"]}
    assert (rows[4]["context_min"], rows[4]["context_max"], rows[6]["context_min"]) == (2, 3, 4)
    assert rows[4]["blocks"] == 2 and rows[4]["short_docs"] == 1
    # the forwards: L = 4 then L = 6; 12 // 4 = 3 windows fit a batch at L = 4, 12 // 6 = 2 at L = 6
    (x4, y4), (x6, y6) = model.calls
    assert x4.tolist() == [docs[0][3:7], docs[0][5:9]] and y4.tolist() == [[-1, -1, 6, 7], [-1, -1, 1, 2]]
    assert x6.tolist() == [docs[0][1:7], docs[0][3:9]] and y6.tolist() == [
        [-1] * 4 + [6, 7],
        [-1] * 4 + [1, 2],
    ]
    assert "stride" in metric["convention"] and "same targets" in metric["convention"]


def test_plan_round_robin_budget_and_short_docs():
    plan = plan_blocks([5, 40, 8, 100, 30], [4, 8], token_budget=13)
    # B = 2, L_k = 8: blocks from 2 L_k = 16 (no window sees the document start); docs 0 and 2 are too short
    # (< 17 tokens); ends 16, 18, ... per usable doc
    assert plan.block == 2 and plan.longest == 8 and plan.short_docs == [0, 2] and plan.usable_docs == 3
    assert plan.blocks == [
        Block(1, 16),
        Block(3, 16),
        Block(4, 16),
        Block(1, 18),
        Block(3, 18),
        Block(4, 18),
        Block(1, 20),
    ]
    assert plan.start == 16 and all(b.end - plan.longest >= plan.longest for b in plan.blocks)
    assert plan.budget_met and plan.scored_positions == 14 and plan.docs == 3
    full = plan_blocks([5, 40, 8, 100, 30], [4, 8], token_budget=10**9)
    assert not full.budget_met
    # every block of every usable document once: ends 16..n-1 step 2
    assert len(full.blocks) == len(set(full.blocks)) == sum(len(range(16, n, 2)) for n in (40, 100, 30))
    assert plan_blocks([5, 40, 8, 100, 30], [4, 8], 13).blocks == plan.blocks  # deterministic


def test_infeasible_lengths_skipped_and_the_longest_feasible_places_blocks():
    plan = plan_blocks([20, 50], [8, 16, 64, 128], token_budget=10**9)
    assert plan.lengths == [8, 16] and [s["length"] for s in plan.skipped] == [64, 128]
    assert "65 tokens" in plan.skipped[0]["reason"] and "longest has 50" in plan.skipped[0]["reason"]
    assert plan.longest == 16 and plan.short_docs == [0] and plan.blocks[0] == Block(1, 32)  # doc 0: 20 < 33
    short = plan_blocks([20, 20], [8, 16], token_budget=10**9)  # no document has 2 L_k + 1: from L_k + 1
    assert short.start == 17 and short.blocks[0] == Block(0, 17)
    none = plan_blocks([5, 8], [8], 100)
    assert none.lengths == [] and none.blocks == [] and none.skipped[0]["length"] == 8
    metric, raw = evaluate_bpb_by_length(
        UniformModel(8), [[1] * 8], [8], 100, torch.ones(8, dtype=torch.long), 64
    )
    assert metric["lengths"] == [] and raw == {} and metric["skipped"][0]["length"] == 8
    with pytest.raises(EvalError, match="does not fit the shortest length"):
        plan_blocks([100], [8, 16], 100, block=9)


def test_blocks_equal_per_window_recompute_on_a_real_model():
    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=16, seed=5)
    token_bytes = torch.ones(300, dtype=torch.long)
    token_bytes[256] = 0
    g = torch.Generator().manual_seed(0)
    docs = [[256] + torch.randint(0, 256, (n,), generator=g).tolist() for n in (50, 9, 31)]
    metric, raw = evaluate_bpb_by_length(model, docs, [8, 16, 64], 10_000, token_bytes, 40)
    plan = plan_blocks([len(d) for d in docs], [8, 16, 64], 10_000)
    # L_k = 16 (64 needs 65 tokens), B = 4, from 2 L_k = 32: doc 0 (51 tokens) ends 32..48 -> 5 blocks; doc 2
    # (32 tokens) is too short
    assert plan.longest == 16 and len(plan.blocks) == 5 and metric["skipped"][0]["length"] == 64
    assert metric["start"] == 32 and metric["document_start_in_view"] is False
    for L in (8, 16):
        nats, units = 0.0, []
        for bl in plan.blocks:
            toks = torch.tensor([docs[bl.doc][bl.end - L : bl.end + 1]])
            with torch.no_grad():
                logits = model(toks[:, :-1])[0]  # (L, V)
            ce = F.cross_entropy(logits[L - 4 :], toks[0, 1:][L - 4 :], reduction="sum").item()
            units.append(ce)
            nats += ce
        res = raw[L]
        assert res.tokens == res.bytes == 20 and res.docs == 1
        assert math.isclose(res.nats, nats, rel_tol=1e-5)
        assert all(math.isclose(a, b, rel_tol=1e-4) for (a, *_), b in zip(res.units, units))
        direct = evaluate_bpb_blocks(
            model, docs, plan.blocks, L, 4, token_bytes, batch_tokens=L
        )  # one per forward
        assert math.isclose(direct.nats, res.nats, rel_tol=1e-5)


def test_unit_ids_and_bytes_pair_across_lengths_and_models():
    """Unit i is the same block of the same text at every length and for every model."""
    torch.set_num_threads(1)
    token_bytes = torch.randint(1, 4, (300,))
    token_bytes[256] = 0
    g = torch.Generator().manual_seed(1)
    docs = [[256] + torch.randint(0, 256, (n,), generator=g).tolist() for n in (70, 45, 12, 90)]
    out = []
    for seed in (1, 2):
        model = random_gpt(300, sequence_len=16, seed=seed)
        out.append(evaluate_bpb_by_length(model, docs, [8, 32], 100, token_bytes, 32)[1])
    byte_units = [u[1] for u in out[0][8].units]
    assert (
        len(byte_units) == 9
    )  # from 2 L_k = 64: doc 0 (71 tokens) 2 blocks, doc 3 (91) 7; the budget is unmet
    for res in (out[0][8], out[0][32], out[1][8], out[1][32]):
        assert [u[1] for u in res.units] == byte_units
    assert [u[0] for u in out[0][8].units] != [u[0] for u in out[1][8].units]
    assert [u[0] for u in out[0][8].units] != [u[0] for u in out[0][32].units]
    assert out[0][8].docs == 2 and out[0][32].docs == 2  # documents under 2 L_k + 1 = 65 tokens are not used


def test_kept_targets_sum_to_their_blocks_and_match_a_recompute():
    """Key-token BPB's inputs: each block's per-target nats sum to its unit and equal a per-window forward."""

    torch.set_num_threads(1)
    model = random_gpt(300, sequence_len=16, seed=6)
    token_bytes = torch.ones(300, dtype=torch.long)
    token_bytes[256] = 0
    docs = _docs((40, 33), seed=3)
    plan = plan_blocks([len(d) for d in docs], [8, 16], 10_000)
    _, raw = score_plan(model, plan, docs, token_bytes, 32, keep_targets=True)
    for L, res in raw.items():
        assert len(res.target_nats) == len(plan.blocks)
        for (nats, *_), kept, bl in zip(res.units, res.target_nats, plan.blocks, strict=True):
            assert math.isclose(sum(kept), nats, rel_tol=1e-9)
            toks = torch.tensor([docs[bl.doc][bl.end - L : bl.end + 1]])
            with torch.no_grad():
                logits = model(toks[:, :-1])[0]
            ce = F.cross_entropy(logits[L - plan.block :], toks[0, 1:][L - plan.block :], reduction="none")
            assert torch.allclose(torch.tensor(kept, dtype=torch.float64), ce.double(), rtol=1e-4)


def test_bigram_repeats_measure_the_distance_to_the_previous_copy():

    assert bigram_repeats([5, 1, 2, 9, 1, 2, 1, 2]) == [0, 0, 0, 0, 0, 3, 0, 2]
