"""Process-group setup for training under `torchrun` (or as one plain process).

torchrun exports RANK / LOCAL_RANK / WORLD_SIZE; without them the job is a single process and no
process group is created. The backend follows the device: NCCL on CUDA, gloo on CPU.

The CUDA caching allocator reads its configuration from the environment exactly once, when CUDA
initialises, so `configure_allocator` must run before anything touches CUDA; `verify_allocator`
then checks that the setting is the one in effect (newer torch reads `PYTORCH_ALLOC_CONF`, older
torch `PYTORCH_CUDA_ALLOC_CONF`; both are set to the same value).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

logger = logging.getLogger(__name__)

ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
DEFAULT_ALLOC_CONF = "expandable_segments:True"
"""Expandable segments avoid fragmentation when eval and train batches alternate shapes."""


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int
    local_rank: int
    world_size: int
    device: Any  # torch.device (kept untyped so this module imports without torch)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def device_type(self) -> str:
        return self.device.type


def configure_allocator(environ: dict[str, str] | None = None) -> str:
    """Set the allocator configuration in the environment before CUDA initialises; returns it.

    A value the user already exported wins (under either name) and is copied to the other name.
    """
    env = os.environ if environ is None else environ
    value = next((env[v] for v in ALLOC_CONF_VARS if env.get(v)), DEFAULT_ALLOC_CONF)
    for var in ALLOC_CONF_VARS:
        env.setdefault(var, value)
    return value


def verify_allocator(expected: str) -> dict[str, Any]:
    """Check (after CUDA is up) that the allocator runs with `expected`; a record for logs and meta."""
    import torch

    record: dict[str, Any] = {"alloc_conf": expected, "verified": None}
    if not torch.cuda.is_available():
        return record
    getter = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    if getter is None:  # older torch: no way to read the setting back
        logger.info("allocator config %r set before CUDA init (this torch cannot read it back)", expected)
        return record
    actual = str(getter())
    wanted = {kv.strip() for kv in expected.split(",") if kv.strip()}
    record["actual"] = actual
    record["verified"] = all(kv.split(":")[0] in actual for kv in wanted)
    if not record["verified"]:
        logger.warning("allocator config %r did not take effect (allocator reports %r)", expected, actual)
    return record


def init_distributed(timeout_s: float | None = None) -> DistInfo:
    """Join the torchrun job if there is one and pick this rank's device; `timeout_s`: the collectives' timeout
    (torch's default, 10 min for NCCL and 30 for gloo, when None)."""
    import torch
    import torch.distributed as dist

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    # Under torchrun a process group is made even for one process: the NCCL/gloo path is then the same
    # at every world size (and exercised by a 1-GPU run); a plain `python` process makes none.
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ or world_size > 1
    if under_torchrun and not dist.is_initialized():
        kwargs: dict[str, Any] = {"backend": backend}
        if backend == "nccl":
            kwargs["device_id"] = device
        if timeout_s is not None:
            kwargs["timeout"] = timedelta(seconds=timeout_s)
        dist.init_process_group(**kwargs)
        logger.info("process group: backend %s, world size %d", backend, world_size)
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


def shutdown_distributed(synchronize: bool = False) -> None:
    """Leave the process group (safe to call when there is none).

    `synchronize` (a run that finished on every rank): meet at a barrier first, so no rank tears its
    connections down while another is still finishing its last collective. Once, in CI, a gloo rank
    aborted at exit ("terminate called without an active exception") after its job had saved its last
    checkpoint, while the other rank was already leaving. Never after a failure: a rank that died would
    leave the others waiting at the barrier."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        if synchronize:
            dist.barrier()
        dist.destroy_process_group()


DDP_OPTIONS: dict[str, Any] = {"gradient_as_bucket_view": True}
"""The trainer's DistributedDataParallel options. `gradient_as_bucket_view`: each parameter's .grad is a view
into DDP's all-reduce bucket rather than a second copy of every gradient (the size of the fp32 parameters:
about 2 GiB at d20). The memory plan (`rlab.memory.plan`) counts DDP's buckets from these."""


def wrap_ddp(model: Any, device: Any) -> Any:
    """DDP around `model` (in a process group), with `DDP_OPTIONS`."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [device.index] if device.type == "cuda" else None
    return DDP(model, device_ids=ids, **DDP_OPTIONS)


def all_reduce_sum(tensor, info: DistInfo):
    """Sum `tensor` across ranks in place (no-op for one process); returns it."""
    import torch.distributed as dist

    if info.is_distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def gather_objects(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's `obj`, in rank order, on every rank."""
    import torch.distributed as dist

    if not info.is_distributed:
        return [obj]
    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def all_gather_scalar(value, info: DistInfo) -> list[float]:
    """Every rank's scalar tensor `value`, in rank order, on every rank."""
    import torch
    import torch.distributed as dist

    if not info.is_distributed:
        return [float(value)]
    out = torch.zeros(info.world_size, device=info.device)
    dist.all_gather_into_tensor(out, value.reshape(1).float())
    return out.tolist()


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's `obj` on every rank."""
    import torch.distributed as dist

    if not info.is_distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(info: DistInfo) -> None:
    import torch.distributed as dist

    if info.is_distributed:
        dist.barrier()
