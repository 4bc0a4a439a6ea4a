"""Which fused kernel SDPA runs for the full-context layers, chosen once per run and named in train.log.

On a Hopper GPU (H100) the fastest causal attention is FlashAttention-3: torch 2.13 routes SDPA's flash
backend to it once `torch.nn.attention.activate_flash_attention_impl("FA3")` has registered the kernels of
the `flash_attn_interface` package (FA3's Hopper build; nanochat-2026 loads the same kernels through the
`kernels` hub, which rlab does not use: nothing is downloaded at run time). Without FA3, cuDNN's fused
attention (faster than FlashAttention-2 on Hopper) goes first in SDPA's priority order where it accepts
the shape; otherwise SDPA keeps its own order (FlashAttention-2 on Ampere and newer). Sliding-window
layers do not use SDPA's fused kernels (`rlab.core.attention`).

`choose_kernel` is the decision from the facts (pure, tested on a CPU); `attention_kernels` gathers the
facts on this machine, applies the choice for the duration of a `with` block and says which kernel runs
(`torch._fused_sdp_choice`, the function SDPA itself dispatches with, at the run's head shape).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.attention
from torch.nn.attention import SDPBackend, sdpa_kernel

from rlab.core.attention import WindowKernel, blocked_applies, use_flex

logger = logging.getLogger(__name__)

FA3_MODULE = "flash_attn_interface"  # FlashAttention-3's Python interface (its `hopper/` build)
_ACTIVATE_IMPL = getattr(torch.nn.attention, "activate_flash_attention_impl", None)
"""SDPA's flash-implementation switch: newer torch only (rlab supports torch >= 2.9, where FA3 then stays off)."""
CUDNN_FIRST = [
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
]
_NAMES = {
    SDPBackend.MATH: "math (unfused)",
    SDPBackend.FLASH_ATTENTION: "FlashAttention-2",
    SDPBackend.EFFICIENT_ATTENTION: "memory-efficient",
    SDPBackend.CUDNN_ATTENTION: "cuDNN",
}


@dataclass(frozen=True)
class KernelChoice:
    """What to switch on: FA3's registration, or SDPA's backends in this priority order (None: torch's)."""

    activate_fa3: bool
    priority: list[SDPBackend] | None


def choose_kernel(
    cuda: bool, capability: tuple[int, int] | None, fa3_importable: bool, cudnn_accepts: bool
) -> KernelChoice:
    """FA3 on Hopper when its package imports; else cuDNN first when it takes the shape; else torch's order."""
    if not cuda:
        return KernelChoice(activate_fa3=False, priority=None)
    if fa3_importable and capability is not None and capability[0] == 9:
        return KernelChoice(activate_fa3=True, priority=None)
    if cudnn_accepts:
        return KernelChoice(activate_fa3=False, priority=CUDNN_FIRST)
    return KernelChoice(activate_fa3=False, priority=None)


def _probe(device: torch.device, n_head: int, n_kv_head: int, head_dim: int, dtype: torch.dtype) -> tuple:
    """Small q, k, v of the run's head shape on `device` (the kernels' eligibility depends on it, not on T)."""
    q = torch.zeros(1, n_head, 256, head_dim, device=device, dtype=dtype)
    k = torch.zeros(1, n_kv_head, 256, head_dim, device=device, dtype=dtype)
    return q, k, k


def _runs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> SDPBackend:
    """The backend SDPA picks for causal attention on these inputs under the current settings."""
    gqa = q.size(1) != k.size(1)
    return SDPBackend(int(torch._fused_sdp_choice(q, k, v, None, 0.0, True, scale=None, enable_gqa=gqa)))


@contextlib.contextmanager
def attention_kernels(
    device: torch.device, n_head: int, n_kv_head: int, head_dim: int, dtype: torch.dtype
) -> Iterator[str]:
    """Select the fastest fused causal kernel available here for the block's duration; yields its name."""
    cuda = device.type == "cuda"
    cudnn_accepts = False
    probe = _probe(device, n_head, n_kv_head, head_dim, dtype)
    if cuda:
        try:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                cudnn_accepts = _runs(*probe) == SDPBackend.CUDNN_ATTENTION
        except RuntimeError:  # no cuDNN attention in this build or for this shape
            cudnn_accepts = False
    choice = choose_kernel(
        cuda,
        torch.cuda.get_device_capability(device) if cuda else None,
        cuda and _ACTIVATE_IMPL is not None and importlib.util.find_spec(FA3_MODULE) is not None,
        cudnn_accepts,
    )
    fa3 = False
    if choice.activate_fa3 and _ACTIVATE_IMPL is not None:
        try:
            _ACTIVATE_IMPL("FA3")
            fa3 = True
        except Exception as exc:  # noqa: BLE001 - a broken FA3 install means "use SDPA's own kernels"
            logger.warning(
                "FlashAttention-3 (%s) did not register (%s); using SDPA's kernels", FA3_MODULE, exc
            )
    held = sdpa_kernel(choice.priority, set_priority=True) if choice.priority else contextlib.nullcontext()
    with held:
        backend = _runs(*probe)
        name = _NAMES.get(backend, backend.name)
        if fa3 and backend == SDPBackend.FLASH_ATTENTION:
            name = "FlashAttention-3"
        if not cuda:  # torch's CPU kernels: a flash-style one, or the unfused math
            name = "flash (CPU kernel)" if backend == SDPBackend.FLASH_ATTENTION else f"{name} (CPU)"
        yield name


def describe_attention(
    sdpa: str,
    window_sizes: list[int | None],
    seq_len: int,
    device: torch.device,
    window_kernel: WindowKernel,
    compiled: bool,
) -> str:
    """One line: the kernel of the full-context layers, and how the sliding-window layers attend, at rows of
    `seq_len` tokens (a window covering the whole row is plain causal attention)."""
    if not compiled and blocked_applies(device, seq_len):
        line = "rlab's blocked causal kernel (CPU, uncompiled) for full-context layers"
    else:
        line = f"SDPA {sdpa} for full-context layers"
    windowed = [w for w in window_sizes if w is not None and w < seq_len - 1]
    if windowed:
        how = "FlexAttention block masks" if use_flex(window_kernel, device) else "SDPA with a dense mask"
        sizes = ", ".join(str(w) for w in sorted(set(windowed)))
        line += f"; {len(windowed)} sliding-window layer(s) (window {sizes}) through {how}"
    return line
