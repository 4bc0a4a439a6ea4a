"""The blocked explicit causal attention equals SDPA's, and is used only where it was measured to be faster."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rlab.core import attention
from rlab.core.attention import blocked_causal_attention, causal_attention, use_blocked

torch.set_num_threads(1)


def qkv(T, heads=2, kv_heads=2, d=8, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, heads, T, d, generator=gen, dtype=dtype)
    k = torch.randn(1, kv_heads, T, d, generator=gen, dtype=dtype)
    v = torch.randn(1, kv_heads, T, d, generator=gen, dtype=dtype)
    return [t.requires_grad_() for t in (q, k, v)]


@pytest.mark.parametrize("T", [512, 1024])
@pytest.mark.parametrize("kv_heads", [2, 1])  # plain and grouped-query attention
def test_blocked_equals_sdpa_in_value_and_gradient(T, kv_heads):
    ours_in, ref_in = qkv(T, kv_heads=kv_heads), qkv(T, kv_heads=kv_heads)
    gqa = kv_heads != 2
    ours = blocked_causal_attention(*ours_in, scale=0.3, enable_gqa=gqa)
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=True, scale=0.3, enable_gqa=gqa)
    grad = torch.randn_like(ref)
    ours.backward(grad)
    ref.backward(grad)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(ours_in, ref_in, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


def test_blocked_bf16_stays_bf16_and_close():
    q, k, v = qkv(512, dtype=torch.bfloat16)
    ours = blocked_causal_attention(q, k, v, scale=0.3)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, scale=0.3)
    assert ours.dtype == torch.bfloat16
    torch.testing.assert_close(ours.float(), ref, rtol=0.02, atol=0.02)


def test_dispatch_window():
    assert not use_blocked(torch.empty(1, 1, 256, 8))  # short: SDPA is as fast
    assert use_blocked(torch.empty(1, 1, 512, 8)) and use_blocked(torch.empty(1, 1, 1024, 8))
    assert not use_blocked(torch.empty(1, 1, 2048, 8))  # long: O(T^2) memory, no gain
    assert not use_blocked(torch.empty(1, 1, 640, 8))  # not a multiple of the block


def test_causal_attention_routes_through_the_blocked_kernel(monkeypatch):
    calls = []
    real = attention.blocked_causal_attention
    monkeypatch.setattr(
        attention, "blocked_causal_attention", lambda *a, **kw: calls.append(1) or real(*a, **kw)
    )
    q, k, v = qkv(512)
    causal_attention(q, k, v, scale=0.3)
    q, k, v = qkv(64)
    causal_attention(q, k, v, scale=0.3)
    assert calls == [1]
