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
"""

from __future__ import annotations

import torch


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
