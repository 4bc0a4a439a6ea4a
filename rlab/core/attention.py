"""Causal self-attention kernels: PyTorch's SDPA, and a blocked explicit form for mid-length CPU training.

Why a second kernel: on a CPU, SDPA's flash kernel reaches a small fraction of the matmul rate at the
sequence lengths a CPU run trains at. Splitting the queries into blocks of `BLOCK` rows, each attending
only to the keys up to its own end, does the causal half of the work as a few large bf16 matmuls with
an fp32 softmax in between; measured on 2 cores (B=2, H=2, d=128, bf16, forward + backward) it takes
about 0.65x of SDPA's time at T=512 and T=1024, about the same at T=256 and T=2048. It keeps the
(T x T) probabilities for the backward (O(T^2) memory, 16 MiB per layer at T=1024), which is why it is
used only in that window and only on a CPU; everywhere else (GPUs, long-context evaluation, masks,
KV caches) SDPA runs.

Sliding windows (nanochat-2026's short layers, `SlidingWindow`): a dense boolean mask through SDPA is the
reference (and the CPU path), but a mask rules out SDPA's flash kernel and computes all T x T scores. On a
GPU they run through FlexAttention with a block mask instead, which skips the blocks the band cannot reach
(a quarter-context window at 8k computes about 30% of the blocks); single-token decoding reads only the
window's keys. The block masks are built from block indices directly (no T x T tensor, even at 64k).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from rlab.core.target_device import device_type

BLOCK = 256  # query rows per block
_EXPLICIT_MIN_T, _EXPLICIT_MAX_T = 2 * BLOCK, 4 * BLOCK  # the measured window where it beats SDPA on a CPU


def blocked_applies(device: torch.device, T: int) -> bool:
    """True where the blocked explicit kernel is the faster one: a CPU, T in [512, 1024], T a multiple of BLOCK."""
    return device_type(device) == "cpu" and _EXPLICIT_MIN_T <= T <= _EXPLICIT_MAX_T and T % BLOCK == 0


def use_blocked(q: torch.Tensor) -> bool:
    """`blocked_applies` for q (B, H, T, d)."""
    return blocked_applies(q.device, q.size(-2))


def blocked_causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, enable_gqa: bool = False
) -> torch.Tensor:
    """softmax(q k^T * scale + causal mask) v, block by block. q (B, H, T, d); k, v (B, H_kv, T, d) -> (B, H, T, d).

    Matmuls run in the inputs' dtype (bf16 under autocast), the softmax in fp32, as SDPA's math does.
    """
    if enable_gqa and k.size(1) != q.size(1):
        group = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, T, d)
    dtype = torch.promote_types(q.dtype, v.dtype)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    T = q.size(-2)
    diagonal_mask = torch.ones(BLOCK, BLOCK, dtype=torch.bool, device=q.device).triu_(1)  # True = masked
    outputs = []
    for start in range(0, T, BLOCK):
        stop = start + BLOCK
        scores = torch.matmul(
            q[:, :, start:stop], k[:, :, :stop].transpose(-2, -1)
        ).float()  # (B, H, BLOCK, stop)
        scores.mul_(scale)
        scores[..., start:stop].masked_fill_(diagonal_mask, float("-inf"))
        probs = scores.softmax(dim=-1).to(dtype)
        outputs.append(torch.matmul(probs, v[:, :, :stop]))  # (B, H, BLOCK, d)
    return torch.cat(outputs, dim=2)


def causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, enable_gqa: bool = False
) -> torch.Tensor:
    """Causal attention over equal-length q and k/v (B, H, T, d), by the faster kernel for this device and T."""
    if use_blocked(q) and not torch.compiler.is_compiling():
        return blocked_causal_attention(q, k, v, scale, enable_gqa)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=enable_gqa)


# ----- sliding windows ------------------------------------------------------------------------------

WindowKernel = Literal["auto", "flex", "dense"]
"""How sliding-window layers attend: "flex" (FlexAttention block masks), "dense" (a boolean mask through
SDPA, the reference), "auto" (flex on CUDA, dense elsewhere: FlexAttention has no CPU backward)."""
FLEX_BLOCK = 128  # FlexAttention's default sparse block size


def use_flex(kernel: WindowKernel, device: torch.device) -> bool:
    """Whether windowed layers run through FlexAttention on `device` under the `kernel` setting."""
    return kernel == "flex" or (kernel == "auto" and device_type(device) == "cuda")


@dataclass
class SlidingWindow:
    """Causal sliding-window attention of queries at positions start .. start+q_len-1 over keys
    0 .. start+q_len-1: key j is visible to the query at position p iff 0 <= p - j <= window (nanochat's
    rule). `flex`: through FlexAttention's `block_mask` (built for q_len > 1; one decoding step reads the
    window's keys), else through SDPA with `dense()`."""

    window: int
    q_len: int
    start: int
    device: torch.device
    flex: bool = False
    block_mask: BlockMask | None = None

    @property
    def kv_len(self) -> int:
        return self.start + self.q_len

    def dense(self) -> torch.Tensor:
        """The mask as a boolean (1, 1, q_len, kv_len) tensor, True = may attend."""
        # query p = start + i sees keys j with p - w <= j <= p: a band, cut straight out of ones
        # (4x faster than comparing position grids, which dominated long CPU evals)
        band = (
            torch.ones(self.q_len, self.kv_len, dtype=torch.bool, device=self.device)
            .tril_(self.start)
            .triu_(self.start - self.window)
        )
        return band[None, None]


def window_block_mask(
    window: int, q_len: int, start: int, device: torch.device | str, block: int = FLEX_BLOCK
) -> BlockMask:
    """FlexAttention's BlockMask for `SlidingWindow(window, q_len, start)`, built from block indices.

    A (query block, key block) pair holds the distances d = p - j between its lowest and highest: none
    of them visible (skipped), all visible in a block lying wholly inside the lengths ("full": no
    mask_mod evaluated), or some (the mask_mod decides per element), as `create_block_mask` classifies
    them, without forming the q_len x kv_len mask it would.
    """
    kv_len = start + q_len
    nq, nk = -(-q_len // block), -(-kv_len // block)
    q0 = torch.arange(nq, device=device) * block  # first query row of each block
    k0 = torch.arange(nk, device=device) * block
    q1 = torch.clamp(q0 + block, max=q_len) - 1  # last valid row
    k1 = torch.clamp(k0 + block, max=kv_len) - 1
    d_min = (start + q0)[:, None] - k1[None, :]  # (nq, nk)
    d_max = (start + q1)[:, None] - k0[None, :]
    some = (d_max >= 0) & (d_min <= window)
    whole = ((q0 + block <= q_len)[:, None]) & ((k0 + block <= kv_len)[None, :])
    full = whole & (d_min >= 0) & (d_max <= window)
    partial = some & ~full

    def ordered(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        counts = blocks.sum(-1, dtype=torch.int32)[None, None]  # (1, 1, nq)
        order = torch.argsort(blocks.to(torch.int32), dim=-1, descending=True, stable=True)
        return counts, order.to(torch.int32)[None, None]  # (1, 1, nq, nk)

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        distance = q_idx + start - kv_idx
        return (distance >= 0) & (distance <= window)

    kv_num, kv_idx = ordered(partial)
    full_num, full_idx = ordered(full)
    return BlockMask.from_kv_blocks(
        kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(q_len, kv_len)
    )


@functools.cache
def _compiled_flex() -> Callable[..., torch.Tensor]:
    """flex_attention compiled for the uncompiled model (evals, samples): eager flex_attention would
    materialise all scores. Shapes left dynamic: evals visit many lengths. (A compiled model compiles
    flex_attention as part of its own graph, at its fixed shapes.)"""
    return torch.compile(flex_attention)


def window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: SlidingWindow,
    scale: float,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Attention of q (B, H, Tq, d) over k, v (B, H_kv, Tk, d) within `mask`'s window -> (B, H, Tq, d)."""
    if not mask.flex:  # the reference: a dense boolean mask
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask.dense(), scale=scale, enable_gqa=enable_gqa
        )
    if q.size(2) == 1:  # one decoding step: the window's keys are the last window + 1
        keep = mask.window + 1
        k, v = k[:, :, -keep:], v[:, :, -keep:]
        return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=enable_gqa)
    if mask.block_mask is None:
        raise ValueError("a FlexAttention window over several queries needs its block mask")
    k, v = k.to(q.dtype), v.to(q.dtype)  # FlexAttention wants one dtype (SDPA's autocast would cast them)
    if q.device.type == "cpu" and q.requires_grad and device_type(q.device) == "cuda":
        # The memory planner's trace of the CUDA path (`rlab.core.target_device`): FlexAttention has no CPU
        # backward, and keeps for it what SDPA's flash kernel keeps (q, k, v, the output, the log-sum-exp),
        # so that kernel stands in. Values are not computed here (fake tensors), only what is kept.
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=enable_gqa)
    eager = q.device.type != "cuda" or torch.compiler.is_compiling()
    attend = cast(Callable[..., torch.Tensor], flex_attention if eager else _compiled_flex())
    return attend(q, k, v, block_mask=mask.block_mask, scale=scale, enable_gqa=enable_gqa)
