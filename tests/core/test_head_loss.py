"""The chunked lm_head + soft-cap + cross-entropy equals the plain definition, in value and gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rlab.core import head_loss
from rlab.core.head_loss import softcap_cross_entropy
from tests.core.tiny_models import noisy_gpt

torch.set_num_threads(1)

CAP = 15.0


def plain_loss(hidden, weight, targets, vocab_size, reduction="mean"):
    """The textbook chain, unchunked: lm_head -> fp32 -> cap * tanh(x / cap) -> cross_entropy."""
    logits = F.linear(hidden, weight)[:, :vocab_size].float()
    logits = CAP * torch.tanh(logits / CAP)
    return F.cross_entropy(logits, targets, ignore_index=-1, reduction=reduction)


def make_inputs(n=70, width=16, vocab=50, padded=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, width, generator=gen)
    weight = torch.randn(padded, width, generator=gen) * 2.0  # large logits, so the soft-cap matters
    targets = torch.randint(0, vocab, (n,), generator=gen)
    targets[::5] = -1  # ignored positions
    return hidden, weight, targets, vocab


@pytest.fixture(params=["one_chunk", "many_chunks"])
def chunking(request, monkeypatch):
    """Force several chunks and several weight-gradient groups (with a ragged last one) at test sizes."""
    if request.param == "many_chunks":
        monkeypatch.setattr(head_loss, "_CHUNK_ELEMENTS", {"cpu": 16 * 50})  # 16 rows per chunk at vocab 50
        monkeypatch.setattr(head_loss, "_GROUP_ELEMENTS", 2 * 16 * 50)  # 2 chunks per group
    return request.param


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_value_and_gradients_match_plain_fp32(chunking, reduction):
    hidden, weight, targets, vocab = make_inputs()
    h1, w1 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    h2, w2 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    ref = plain_loss(h1, w1, targets, vocab, reduction)
    ours = softcap_cross_entropy(h2, w2, targets, vocab, CAP, reduction)
    (ref * 1.7).backward()  # a non-unit incoming gradient
    (ours * 1.7).backward()
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h2.grad, h1.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w2.grad, w1.grad, rtol=1e-4, atol=1e-5)
    assert torch.all(w2.grad[vocab:] == 0)  # vocab padding rows get no gradient


def test_per_token_losses_without_grad(chunking):
    hidden, weight, targets, vocab = make_inputs()
    with torch.no_grad():
        ours = softcap_cross_entropy(hidden, weight, targets, vocab, CAP, "none")
        ref = plain_loss(hidden, weight, targets, vocab, "none")
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    assert torch.all(ours[targets == -1] == 0)


@pytest.mark.parametrize("scored", [0, 1, 5])
def test_per_token_losses_when_few_rows_are_scored(chunking, scored):
    """Evals score only the tail of each window; the head then runs on those rows alone, same values."""
    hidden, weight, targets, vocab = make_inputs()
    targets = targets.clone()
    targets[: targets.numel() - scored] = -1
    with torch.no_grad():
        ours = softcap_cross_entropy(hidden, weight, targets, vocab, CAP, "none")
        ref = plain_loss(hidden, weight, targets, vocab, "none")
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    assert ours.shape == targets.shape and torch.all(ours[targets == -1] == 0)


def test_bf16_autocast_matches_the_plain_autocast_path():
    hidden, weight, targets, vocab = make_inputs(n=40, width=32)
    h1, w1 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    h2, w2 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cpu", torch.bfloat16):
        ref = plain_loss(h1, w1, targets, vocab)
        ours = softcap_cross_entropy(h2, w2, targets, vocab, CAP)
    ref.backward()
    ours.backward()
    assert ours.dtype == torch.float32 and h2.grad.dtype == torch.float32 and w2.grad.dtype == torch.float32
    torch.testing.assert_close(ours, ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(h2.grad, h1.grad, rtol=0.02, atol=2e-3)
    torch.testing.assert_close(w2.grad, w1.grad, rtol=0.02, atol=2e-3)


def test_reused_cpu_scratch_gives_fresh_results_for_other_sizes():
    """The CPU scratch buffers outlive a call; a later, smaller or larger batch must not see stale rows."""
    for n in (70, 9, 130):
        hidden, weight, targets, vocab = make_inputs(n=n, seed=n)
        with torch.no_grad():
            ours = softcap_cross_entropy(hidden, weight, targets, vocab, CAP, "sum")
        torch.testing.assert_close(
            ours, plain_loss(hidden, weight, targets, vocab, "sum"), rtol=1e-5, atol=1e-4
        )


def test_all_targets_ignored_gives_zero_loss_and_gradient():
    hidden, weight, _, vocab = make_inputs(n=8)
    targets = torch.full((8,), -1)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss = softcap_cross_entropy(h, w, targets, vocab, CAP)
    loss.backward()
    assert loss.item() == 0.0 and torch.all(h.grad == 0) and torch.all(w.grad == 0)


def test_second_backward_is_refused():
    hidden, weight, targets, vocab = make_inputs(n=8)
    h = hidden.clone().requires_grad_()
    loss = softcap_cross_entropy(h, weight, targets, vocab, CAP)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="twice"):
        loss.backward()


def test_bad_reduction_is_refused():
    hidden, weight, targets, vocab = make_inputs(n=8)
    with pytest.raises(ValueError, match="reduction"):
        softcap_cross_entropy(hidden, weight, targets, vocab, CAP, "max")


def test_gpt_forward_loss_equals_cross_entropy_of_its_logits():
    """GPT.forward's three loss paths (mean with grad, per-token without, per-token with grad) agree."""

    model = noisy_gpt(0, 0.3, sequence_len=16, n_layer=1, n_head=2, n_embd=16)
    x = torch.randint(0, 100, (2, 16))
    y = torch.randint(0, 100, (2, 16))
    y[0, :3] = -1
    logits = model(x)  # (B, T, V)
    ref = F.cross_entropy(logits.view(-1, 100), y.view(-1), ignore_index=-1, reduction="none")
    with torch.no_grad():
        fused_tokens = model(x, y, loss_reduction="none")
    plain_tokens = model(x, y, loss_reduction="none")  # grad enabled: the plain path
    assert plain_tokens.requires_grad
    torch.testing.assert_close(fused_tokens, ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(plain_tokens, ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(model(x, y), ref.sum() / (y != -1).sum(), rtol=1e-5, atol=1e-5)
