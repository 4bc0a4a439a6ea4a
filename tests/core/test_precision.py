"""The bf16 stream (`GPT.set_stream_dtype`, chosen by `rlab.core.precision.stream_dtype`): wte, value
embeddings and the residual stream in bf16 as nanochat keeps them on a GPU. Forced on a CPU here, under
CPU bf16 autocast, against the fp32 stream every CPU run keeps."""

from __future__ import annotations

import pytest
import torch

from rlab.core.gpt import GPT, GPTConfig
from rlab.core.optim import build_optimizers
from rlab.core.precision import stream_dtype
from rlab.spec.train import LRSpec
from tests.core.saved_bytes import head_and_layer_bytes
from tests.core.tiny_models import initialized_gpt

torch.set_num_threads(1)

ARCHS = ["nanochat-2025", "nanochat-2026"]


def make_model(architecture: str, n_layer: int = 2, seed: int = 0) -> GPT:
    shape = dict(sequence_len=64, vocab_size=200, n_layer=n_layer, n_embd=64, window_pattern="SL")
    model = initialized_gpt(seed, head_std=0.05, architecture=architecture, **shape)
    with torch.no_grad():
        for block in model.transformer.h:  # non-zero output projections: every block changes the stream
            block.attn.c_proj.weight.normal_(0.0, 0.02)
            block.mlp.c_proj.weight.normal_(0.0, 0.02)
    return model


def batch(seed: int = 1, T: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 200, (2, T), generator=gen)
    return x, torch.roll(x, -1, dims=1)


def test_the_setting_is_bf16_only_on_cuda_under_bf16_autocast():
    assert stream_dtype(torch.device("cuda", 0), torch.bfloat16) == torch.bfloat16
    assert stream_dtype(torch.device("cuda", 0), None) == torch.float32
    assert stream_dtype(torch.device("cpu"), torch.bfloat16) == torch.float32
    assert stream_dtype(torch.device("cpu"), None) == torch.float32
    assert (
        GPT(GPTConfig(n_layer=1, n_embd=32, n_head=2, n_kv_head=2, vocab_size=64)).stream_dtype
        == torch.float32
    )


@pytest.mark.parametrize("architecture", ARCHS)
def test_bf16_stream_matches_fp32_within_bf16_tolerance(architecture):
    ref, low = make_model(architecture), make_model(architecture)
    low.set_stream_dtype(torch.bfloat16)
    assert low.transformer.wte.weight.dtype == torch.bfloat16
    if low.value_embeds is not None:
        assert all(p.dtype == torch.bfloat16 for p in low.value_embeds.parameters())
    assert all(p.dtype == torch.float32 for p in low.transformer.h.parameters())  # matrices stay fp32

    stream: list[torch.dtype] = []
    for block in low.transformer.h:
        block.register_forward_hook(lambda mod, args, out: stream.append(out.dtype))
    x, y = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_ref = ref(x, y)
        loss_low = low(x, y)
    assert stream == [torch.bfloat16] * len(low.transformer.h)  # the residual stream stays bf16
    assert loss_low.dtype == torch.float32
    torch.testing.assert_close(loss_low, loss_ref, rtol=2e-2, atol=0)
    loss_ref.backward()
    loss_low.backward()
    for (name, p_ref), p_low in zip(ref.named_parameters(), low.parameters(), strict=True):
        g_ref, g_low = p_ref.grad.flatten(), p_low.grad.float().flatten()
        # bf16 rounding of the stream: ~10% on the scalars' long sums (a cancelling one is ~0 in fp32)
        assert (g_low - g_ref).norm() <= 0.1 * g_ref.norm() + 1e-3, name


def test_bf16_stream_halves_the_streams_saved_bytes_per_layer():
    def make(n_layer: int, low: bool) -> GPT:
        model = make_model("nanochat-2025", n_layer)
        if low:
            model.set_stream_dtype(torch.bfloat16)
        return model

    _, fp32_layer = head_and_layer_bytes(lambda n: make(n, False), 200, 32, 64, amp=True)
    _, bf16_layer = head_and_layer_bytes(lambda n: make(n, True), 200, 32, 64, amp=True)
    # per layer the two norms' inputs (the residual stream, 64 channels) drop from 4 to 2 bytes each
    assert fp32_layer - bf16_layer == 2 * 64 * 2


@pytest.mark.parametrize("architecture", ARCHS)
def test_bf16_state_dict_loads_into_an_fp32_model_and_as_nanochat_loads_it(architecture):
    low = make_model(architecture)
    low.set_stream_dtype(torch.bfloat16)
    state = low.state_dict()
    assert state["transformer.wte.weight"].dtype == torch.bfloat16  # saved as nanochat saves on a GPU
    fresh = make_model(architecture, seed=5)
    fresh.load_nanochat_state_dict(state)  # rlab's loader: upcast into the fp32 parameters, exactly
    for key, value in fresh.state_dict().items():
        assert value.dtype == torch.float32
        assert torch.equal(value, state[key].float()), key
    nanochat_way = make_model(architecture, seed=6)
    nanochat_way.load_state_dict(state, strict=True, assign=True)  # nanochat's build_model on a GPU
    assert nanochat_way.transformer.wte.weight.dtype == torch.bfloat16
    x, _ = batch()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(nanochat_way(x), low(x))


def test_optimizers_step_bf16_embeddings():
    """AdamW takes the bf16 embedding (state in bf16, as nanochat's AdamW keeps it); training still learns."""
    model = make_model("nanochat-2026")
    model.set_stream_dtype(torch.bfloat16)
    optimizers = build_optimizers(model, LRSpec(), model.config.n_embd)
    x, y = batch()
    losses = []
    for _ in range(5):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        for opt in optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert model.transformer.wte.weight.dtype == torch.bfloat16
    assert losses[-1] < losses[0]
