"""Which dtype the embeddings and the residual stream keep: nanochat's memory choice, decided in one place.

nanochat keeps its token embedding in bf16 on a GPU, and with it the activations that flow from it:
- d314e96 (nanochat-2025) casts `wte` to bf16 in `init_weights` when it sits on CUDA and trains under
  bf16 autocast (its value stream then starts in bf16; matrices stay fp32 for the optimizer);
- 92d63d4 (nanochat-2026) drops autocast and runs in a COMPUTE_DTYPE (bf16 on sm80+ GPUs, fp32 on a
  CPU): `wte` and the value embeddings are cast to it, the embedding output is cast to it, and the
  norms run in it, so the whole residual stream is bf16; the matmuls cast their fp32 weights.
Both save the model state dict as it is, so their checkpoints hold bf16 embeddings (and load them with
`assign=True`, or upcast them on a CPU).

rlab does the same through one setting, `GPT.set_stream_dtype`, chosen here: bf16 where training or
evaluation runs bf16 autocast on CUDA, fp32 everywhere else (a CPU run is numerically what it always
was). Tests force bf16 on a CPU to compare it with fp32.

Training's autocast dtype (`resolve_dtype`, from `train.dtype`) is decided here too: master weights always stay
fp32, the matmuls run bf16 where the device does them natively.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Literal

import torch

logger = logging.getLogger(__name__)


def stream_dtype(device: torch.device, amp_dtype: torch.dtype | None) -> torch.dtype:
    """bf16 on CUDA under bf16 autocast (nanochat's choice), else fp32."""
    if device.type == "cuda" and amp_dtype == torch.bfloat16:
        return torch.bfloat16
    return torch.float32


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast runs matmuls in on this device type, None when it is off (or the device has no
    autocast: the meta device, on which memory plans trace the model)."""
    if device_type not in ("cuda", "cpu"):
        return None
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


def cpu_has_fast_bf16() -> bool:
    """AVX512-BF16 or AMX: bf16 matmuls run natively (several times the fp32 rate)."""
    cpu = getattr(torch, "cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


def resolve_dtype(name: str, device: Any):
    """The autocast dtype (torch.bfloat16) or None for plain fp32; master weights always stay fp32."""
    if name == "float32":
        return None
    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported()
    elif device.type == "cpu":
        supported = cpu_has_fast_bf16()
    else:
        supported = False
    if name == "bfloat16":
        if not supported:
            logger.warning("train.dtype=bfloat16 on %s without native bf16 support: it will be slow", device)
        return torch.bfloat16
    return torch.bfloat16 if supported else None


def autocast_context(device: Any, amp_dtype: Any) -> contextlib.AbstractContextManager:
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


@dataclass(frozen=True)
class Precision:
    """A training run's numerics: its device and autocast dtype (None: plain fp32; master weights stay fp32)."""

    device: torch.device
    amp_dtype: torch.dtype | None

    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast_context(self.device, self.amp_dtype)

    @property
    def dtype_name(self) -> Literal["bfloat16", "float32"]:
        """What checkpoints (`train_state.dtype`) and memory plans record."""
        return "bfloat16" if self.amp_dtype is not None else "float32"
