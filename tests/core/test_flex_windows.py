"""Sliding-window layers through FlexAttention (the GPU path) against the dense-mask path (the reference).

FlexAttention has no CPU backward, so these compare forwards (eager flex on a CPU; the slow test compiles
it with inductor), at several lengths and windows, with grouped-query heads, through the whole nanochat-2026
model and through KV-cache decoding. The block masks are built from block indices; they must equal what
torch's own `create_block_mask` makes from the element-wise rule.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from rlab.core.attention import SlidingWindow, use_flex, window_attention, window_block_mask
from rlab.core.engine import Engine
from rlab.core.gpt import GPT, KVCache
from tests.core.tiny_models import noisy_gpt

torch.set_num_threads(1)

pytestmark = pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile.*")


@pytest.mark.parametrize(
    ("window", "q_len", "start", "block"),
    [
        (16, 100, 0, 16),
        (40, 130, 0, 32),
        (0, 50, 0, 16),
        (200, 64, 0, 16),
        (24, 37, 90, 16),
        (128, 300, 0, 128),
    ],
)
def test_block_mask_equals_torchs_create_block_mask(window, q_len, start, block):
    ours = window_block_mask(window, q_len, start, "cpu", block=block)

    def rule(b, h, q_idx, kv_idx):
        d = q_idx + start - kv_idx
        return (d >= 0) & (d <= window)

    ref = create_block_mask(rule, None, None, q_len, start + q_len, device="cpu", BLOCK_SIZE=block)
    assert torch.equal(ours.to_dense(), ref.to_dense())
    assert torch.equal(ours.kv_num_blocks, ref.kv_num_blocks)
    assert torch.equal(ours.full_kv_num_blocks, ref.full_kv_num_blocks)
    for got, want, counts in (
        (ours.kv_indices, ref.kv_indices, ref.kv_num_blocks),
        (ours.full_kv_indices, ref.full_kv_indices, ref.full_kv_num_blocks),
    ):
        for row in range(counts.size(-1)):  # the listed blocks; past the count the order is unspecified
            n = int(counts[0, 0, row])
            assert torch.equal(got[0, 0, row, :n], want[0, 0, row, :n])
    assert ours.seq_lengths == (q_len, start + q_len)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("T", "window"), [(64, 16), (200, 128), (300, 100), (257, 0)])
def test_flex_equals_the_dense_mask(T, window, dtype):
    gen = torch.Generator().manual_seed(T + window)
    q = torch.randn(2, 4, T, 32, generator=gen).to(dtype)
    k, v = (torch.randn(2, 2, T, 32, generator=gen).to(dtype) for _ in range(2))
    dense = SlidingWindow(window, T, 0, torch.device("cpu"))
    flex = SlidingWindow(
        window, T, 0, torch.device("cpu"), flex=True, block_mask=window_block_mask(window, T, 0, "cpu")
    )
    ref = window_attention(q, k, v, dense, 0.2, enable_gqa=True)
    out = window_attention(q, k, v, flex, 0.2, enable_gqa=True)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.float(), ref.float(), rtol=tol, atol=tol)


def test_auto_means_flex_on_cuda_only():
    assert use_flex("auto", torch.device("cuda", 0)) and not use_flex("auto", torch.device("cpu"))
    assert use_flex("flex", torch.device("cpu")) and not use_flex("dense", torch.device("cuda", 0))


def make_2026(seed: int = 0) -> GPT:
    """nanochat-2026 with a short window of 128 (sequence_len 512, pattern SL): windowed at T > 129."""
    shape = dict(sequence_len=512, vocab_size=300, n_layer=4, n_embd=64, window_pattern="SL")
    model = noisy_gpt(seed, architecture="nanochat-2026", **shape).eval()
    assert model.window_sizes == [128, 512, 128, 512]
    return model


@pytest.mark.parametrize("T", [100, 200, 300])
def test_the_model_with_flex_windows_equals_dense(T):
    model = make_2026()
    x = torch.randint(0, 300, (2, T), generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        model.window_kernel = "dense"
        ref = model(x)
        loss_ref = model(x, x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ref_bf16 = model(x)
        model.window_kernel = "flex"
        out = model(x)
        loss = model(x, x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out_bf16 = model(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-5)
    # bf16 autocast: flex is as close to the fp32 reference as the dense path is (the random weights here
    # amplify bf16 rounding through the layers, so an absolute tolerance would say little)
    err_flex, err_dense = (out_bf16 - ref).abs(), (ref_bf16 - ref).abs()
    assert err_flex.mean() <= 1.25 * err_dense.mean() and err_flex.max() <= 2 * err_dense.max()


def test_kv_cache_prefill_chunk_and_decoding_with_flex_equal_dense():
    """A prefill, a chunk after it (a block mask with an offset), then single steps (the window's keys)."""
    model = make_2026()
    x = torch.randint(0, 300, (1, 260), generator=torch.Generator().manual_seed(3))
    outs = {}
    for kernel in ("dense", "flex"):
        model.window_kernel = kernel
        cache = KVCache(1, 2, model.config.head_dim, 4, "cpu", seq_len=260)
        with torch.no_grad():
            parts = [model(x[:, :150], kv_cache=cache), model(x[:, 150:230], kv_cache=cache)]
            parts += [model(x[:, t : t + 1], kv_cache=cache) for t in range(230, 260)]
        outs[kernel] = torch.cat(parts, dim=1)
    torch.testing.assert_close(outs["flex"], outs["dense"], rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        model.window_kernel = "dense"
        torch.testing.assert_close(
            outs["dense"], model(x), rtol=1e-4, atol=1e-4
        )  # and both equal one forward


def test_greedy_generation_is_the_same_tokens_with_flex():
    model = make_2026(seed=1)
    prompts = torch.randint(0, 300, (3, 180), generator=torch.Generator().manual_seed(4)).tolist()
    tokens = {}
    for kernel in ("dense", "flex"):
        model.window_kernel = kernel
        tokens[kernel] = Engine(model).greedy(prompts, max_tokens=40)
    assert tokens["flex"] == tokens["dense"]


@pytest.mark.slow
def test_compiled_flex_model_equals_dense():
    """The path a GPU runs: the model compiled with FlexAttention inside (inductor's CPU flex kernel here)."""
    model = make_2026()
    model.window_kernel = "flex"
    model.precompute_tables(256, "cpu")
    x = torch.randint(0, 300, (2, 256), generator=torch.Generator().manual_seed(5))
    compiled = torch.compile(model, dynamic=False)
    with torch.no_grad():
        out = compiled(x)
        model.window_kernel = "dense"
        ref = model(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
