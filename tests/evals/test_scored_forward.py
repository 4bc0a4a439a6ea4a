"""hidden_at / head_stats: the scored-positions-only forward equals the full forward at those positions."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rlab.evals.scored_forward import HEAD_CHUNK, head_stats, hidden_at
from rlab.spec.rope import RopeSpec
from tests.evals.conftest import random_gpt


def _gpt(n_layer: int, n_head: int, n_kv_head: int, vocab: int = 96, rope=None):
    return random_gpt(vocab, sequence_len=16, rope=rope, n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head)


@pytest.mark.parametrize(
    "n_layer, n_head, n_kv_head, variant", [(1, 2, 2, "rope"), (2, 2, 2, "yarn"), (3, 4, 2, "dynamic-ntk")]
)
def test_hidden_at_equals_hidden_states_causal(n_layer, n_head, n_kv_head, variant):
    """Rows longer than L0 = 16, so YaRN's attention temperature and dynamic-ntk's length both matter."""

    rope = RopeSpec(variant=variant, factor=4.0) if variant != "rope" else None
    model = _gpt(n_layer, n_head, n_kv_head, rope=rope)
    ids = torch.randint(0, 96, (3, 20), generator=torch.Generator().manual_seed(1))  # (B, T)
    rows, cols = [0, 0, 0, 1, 2, 2], [0, 7, 19, 11, 3, 4]  # row 1 has one query, row 0 three
    with torch.inference_mode():
        full = model.hidden_states(ids)  # (B, T, C)
        got = hidden_at(model, ids, rows, cols)  # (N, C)
    torch.testing.assert_close(got, full[rows, cols], rtol=1e-5, atol=1e-5)


def test_hidden_at_equals_hidden_states_with_positions_and_mask():
    """A packed row: prefix (segment 0) then two branches that restart at the prefix's end."""
    model = _gpt(2, 4, 2)
    seg = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2], [0, 0, 1, 2, 2, -1, -1, -1]])  # (B, T); -1 = padding
    pos = torch.tensor([[0, 1, 2, 3, 4, 3, 4, 5], [0, 1, 2, 2, 3, 0, 0, 0]])  # (B, T)
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    mask = (((seg[:, None, :] == 0) | (seg[:, None, :] == seg[:, :, None])) & causal)[:, None]  # (B, 1, T, T)
    ids = torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(2))
    rows, cols = [0, 0, 0, 1, 1], [2, 4, 7, 2, 4]
    with torch.inference_mode():
        full = model.hidden_states(ids, pos, mask, freq_len=6)
        got = hidden_at(model, ids, rows, cols, pos, mask, freq_len=6)
    torch.testing.assert_close(got, full[rows, cols], rtol=1e-5, atol=1e-5)


def test_head_stats_equals_full_logits_across_chunks():
    model = _gpt(1, 2, 2)
    n = 2 * HEAD_CHUNK + 5  # two full chunks and a partial one
    hidden = F.rms_norm(torch.randn(n, 32, generator=torch.Generator().manual_seed(3)), (32,))
    targets = torch.randint(0, 96, (n,), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        logits = model.logits_at(hidden)
        targets[::3] = logits.argmax(-1)[::3]  # some hits, some misses
        nll, hit = head_stats(model, hidden, targets)
        empty_nll, empty_hit = head_stats(model, hidden[:0], targets[:0])
    torch.testing.assert_close(nll, F.cross_entropy(logits, targets, reduction="none"))
    assert torch.equal(hit, logits.argmax(-1) == targets) and bool(hit.any()) and not bool(hit.all())
    assert empty_nll.shape == empty_hit.shape == (0,)
