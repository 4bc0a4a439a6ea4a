"""Under torch.compile the training loss still runs the chunked head (`rlab.core.head_loss`): the compiled
backward keeps no (tokens x vocab) logits. Counted with saved-tensor hooks at nanochat's vocab (65,536).

The default suite compiles with the `aot_eager` backend (AOTAutograd's graphs and saved tensors, no code
generation: seconds); the slow test repeats the count with inductor, the backend training uses.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rlab.core.gpt import GPT
from tests.core.saved_bytes import head_and_layer_bytes, per_token
from tests.core.tiny_models import initialized_gpt

VOCAB = 65536
WIDTH = 64
HEAD_LIMIT = 8 * 1024  # bytes per token the head may keep for backward (no vocab-wide logits)


def make_model(n_layer: int) -> GPT:
    return initialized_gpt(head_std=0.05, vocab_size=VOCAB, n_layer=n_layer, n_head=2, n_embd=WIDTH)


@pytest.mark.parametrize(
    "amp", [pytest.param(False, marks=pytest.mark.slow), True], ids=["fp32", "bf16_autocast"]
)
def test_compiled_step_keeps_the_hidden_gradient_not_the_logits(amp):
    head, _ = head_and_layer_bytes(
        make_model, VOCAB, 16, 32, compile_backend="aot_eager", amp=amp, per_layer=False
    )
    # the head's backward keeps its hidden-state gradient: width x (2 under bf16 autocast, else 4) bytes
    assert head == WIDTH * (2 if amp else 4)
    assert head <= HEAD_LIMIT


def test_the_plain_chain_compiled_keeps_the_logits():
    """The contrast: what compiling lm_head -> fp32 -> soft-cap -> cross_entropy keeps (what GPT.forward ran
    under torch.compile before): at least the fp32 logits, 4 x vocab bytes per token."""
    weight = torch.nn.Parameter(torch.randn(VOCAB, WIDTH) * 0.05)

    def chain(hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden, weight).float()
        logits = 15.0 * torch.tanh(logits / 15.0)
        return F.cross_entropy(logits, targets)

    compiled = torch.compile(chain, backend="aot_eager", dynamic=False)
    holder = torch.nn.Linear(1, 1)
    holder.weight = weight  # saved_bytes skips parameters

    def step(T: int) -> torch.Tensor:
        hidden = torch.randn(T, WIDTH, requires_grad=True)
        return compiled(hidden, torch.randint(0, VOCAB, (T,)))

    assert per_token(holder, step, 16, 32) >= 4 * VOCAB > 16 * HEAD_LIMIT


def test_compiled_loss_and_gradients_equal_the_plain_head():
    """The compiled step (chunked head, eager) against the eager model's logits through the textbook chain."""
    model = make_model(2)
    x = torch.randint(0, VOCAB, (2, 32), generator=torch.Generator().manual_seed(1))
    y = torch.roll(x, -1, dims=1)
    y[:, -3:] = -1
    model.precompute_tables(32, "cpu")
    compiled = torch.compile(model, backend="aot_eager", dynamic=False)
    loss = compiled(x, y)
    loss.backward()
    ours = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)

    logits = model(x)  # (B, T, V): soft-capped fp32 logits
    ref = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1), ignore_index=-1)
    ref.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-5)
    for name, p in model.named_parameters():
        torch.testing.assert_close(ours[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
def test_inductor_compiled_step_keeps_the_hidden_gradient_not_the_logits():
    head, _ = head_and_layer_bytes(
        make_model, VOCAB, 16, 32, compile_backend="inductor", amp=True, per_layer=False
    )
    assert head == WIDTH * 2 <= HEAD_LIMIT
