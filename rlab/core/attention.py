"""Causal self-attention kernels: PyTorch's SDPA, and a blocked explicit form for mid-length CPU training.

Why a second kernel: on a CPU, SDPA's flash kernel reaches a small fraction of the matmul rate at the
sequence lengths a CPU run trains at. Splitting the queries into blocks of `BLOCK` rows, each attending
only to the keys up to its own end, does the causal half of the work as a few large bf16 matmuls with
an fp32 softmax in between; measured on 2 cores (B=2, H=2, d=128, bf16, forward + backward) it takes
about 0.65x of SDPA's time at T=512 and T=1024, about the same at T=256 and T=2048. It keeps the
(T x T) probabilities for the backward (O(T^2) memory, 16 MiB per layer at T=1024), which is why it is
used only in that window and only on a CPU; everywhere else (GPUs, long-context evaluation, masks,
KV caches) SDPA runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BLOCK = 256  # query rows per block
_EXPLICIT_MIN_T, _EXPLICIT_MAX_T = 2 * BLOCK, 4 * BLOCK  # the measured window where it beats SDPA on a CPU


def use_blocked(q: torch.Tensor) -> bool:
    """True where the blocked explicit kernel is the faster one: CPU tensors, T in [512, 1024], T a multiple of BLOCK."""
    T = q.size(-2)
    return q.device.type == "cpu" and _EXPLICIT_MIN_T <= T <= _EXPLICIT_MAX_T and T % BLOCK == 0


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
