"""What a failed training step means, said in one line: a compiler error, out of memory, a rank's NCCL error.

* A compiler error (torch._dynamo's and inductor's exception types) can only mean "this model does not
  compile here"; it is the one failure after which training goes on, uncompiled, and only at the first
  step (where compilation happens), with every rank agreeing (`any_rank`), so no rank runs a different
  program from the others. Any other exception is a real failure and stops the run.
* Out of memory (`torch.OutOfMemoryError`, also when a compiler error wraps one) becomes one line with
  the shape that did not fit and the memory plan's way out (`rlab memory`): the largest device batch
  that fits, with the accumulation that keeps `total_batch_size`.
* An NCCL / distributed error names the rank, host and device it happened on: in a job of 8 ranks, the
  first rank to report is usually where it began.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rlab.errors import TrainingError

if TYPE_CHECKING:
    from rlab.memory.shape import TrainShape

logger = logging.getLogger(__name__)

PLAN_TIMEOUT_S = 600  # the plan of a d20 step with its torch.compile count takes about a minute on one core


def compiler_error_types() -> tuple[type[BaseException], ...]:
    """Exception types raised by torch.compile's stages (dynamo, AOTAutograd's backends, inductor)."""
    import torch._dynamo.exc as dynamo
    import torch._inductor.exc as inductor

    return (
        dynamo.TorchDynamoException,  # includes BackendCompilerFailed and InductorError
        inductor.CppCompileError,
        inductor.InvalidCxxCompiler,
        inductor.OperatorIssue,
        inductor.CppWrapperCodegenError,
        inductor.SubgraphLoweringException,
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it wraps: a compiler error's inner exception, the cause, the context."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = getattr(current, "inner_exception", None) or current.__cause__ or current.__context__


def is_oom(exc: BaseException) -> bool:
    """True when `exc`, or an exception it wraps (a compiler error can wrap one), is out of memory."""
    import torch

    return any(isinstance(e, torch.OutOfMemoryError) for e in _chain(exc))


def is_compiler_error(exc: BaseException) -> bool:
    return isinstance(exc, compiler_error_types()) and not is_oom(exc)


def is_distributed_error(exc: BaseException) -> bool:
    import torch.distributed as dist

    types = tuple(getattr(dist, n) for n in ("DistError", "DistBackendError") if hasattr(dist, n))
    return bool(types) and isinstance(exc, types)


def any_rank(flag: bool, info) -> bool:
    """True on every rank when `flag` is true on any rank (a MAX all-reduce; `flag` itself on one process)."""
    if not info.is_distributed:
        return flag
    import torch
    import torch.distributed as dist

    t = torch.tensor([1.0 if flag else 0.0], device=info.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def describe(exc: BaseException) -> str:
    """`BackendCompilerFailed: RuntimeError: <its first line>`: the type, and what a wrapper wraps."""
    inner = getattr(exc, "inner_exception", None)
    if isinstance(inner, BaseException):
        return f"{type(exc).__name__}: {type(inner).__name__}: {_first_line(inner)}"
    return f"{type(exc).__name__}: {_first_line(exc)}"


def where(info) -> str:
    """`rank 3 of 8 (host node07, cuda:3)`."""
    return f"rank {info.rank} of {info.world_size} (host {socket.gethostname()}, {info.device})"


def distributed_error(exc: BaseException, step: int, info) -> TrainingError:
    return TrainingError(
        f"Distributed ({'NCCL' if info.device.type == 'cuda' else 'gloo'}) error on {where(info)} at step "
        f"{step}: {_first_line(exc)}",
        hint="One rank's failure stops them all; the rank that reports first in train.log is usually where it "
        "began. NCCL_DEBUG=INFO in the environment logs more; rerun with resume: true.",
    )


def oom_error(exc: BaseException, step: int, info, plan: dict[str, Any] | None) -> TrainingError:
    """One line for an out-of-memory failure: where, the shape, and what the memory plan suggests.

    `plan` is `rlab memory`'s JSON for the failing shape (None when it could not be computed).
    """
    shape = plan["shape"] if plan else None
    message = f"Out of memory on {where(info)} at step {step}: {_first_line(exc)}"
    if plan is None or shape is None:
        return TrainingError(
            message,
            hint="Lower train.device_batch_size (with total_batch_size set, the accumulation keeps the tokens per "
            "step); `rlab memory` plans a shape's memory without a GPU. Then rerun with resume: true.",
        )
    batch = f"device_batch_size {shape['device_batch_size']} x seq_len {shape['seq_len']}"
    planned = (
        f"`rlab memory` plans {plan['peak_gib']:.1f} GiB per rank for {batch} "
        f"({shape['grad_accum_steps']} accumulation step(s)), {plan['budget_gib']:.0f} GiB usable of "
        f"{plan['gpu_memory_gib']:.0f}."
    )
    suggestion = plan.get("suggestion")
    if suggestion and suggestion.get("activation_checkpointing", "off") != "off":
        hint = (
            f"{planned} Set train.activation_checkpointing: {suggestion['activation_checkpointing']} (planned peak "
            f"{suggestion['peak_gib']:.1f} GiB) and rerun with resume: true."
        )
    elif suggestion:
        hint = (
            f"{planned} Set train.device_batch_size: {suggestion['device_batch_size']} (then "
            f"{suggestion['grad_accum_steps']} accumulation steps keep total_batch_size; planned peak "
            f"{suggestion['peak_gib']:.1f} GiB) and rerun with resume: true."
        )
    elif plan.get("fits"):
        hint = (
            f"{planned} The plan fits, so memory went to something it does not count (another process on "
            "this GPU, fragmentation, a larger eval batch); check nvidia-smi, then rerun with resume: true."
        )
    else:
        hint = f"{planned} Not even one row per micro-batch fits: use a shorter seq_len or a GPU with more memory."
    return TrainingError(message, hint=hint)


def plan_in_subprocess(shape: TrainShape, gpu_memory_gib: float) -> dict[str, Any] | None:
    """`rlab memory`'s plan of `shape` (its JSON), computed in a fresh CPU-only process so the failing
    trainer's CUDA state and process group are not involved; None when it fails or times out."""
    request = json.dumps({"shape": shape.model_dump(mode="json"), "gpu_memory_gib": gpu_memory_gib})
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(var, None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rlab.memory"],
            input=request,
            capture_output=True,
            text=True,
            timeout=PLAN_TIMEOUT_S,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("memory plan for the OOM message failed: %s", exc)
        return None
    if proc.returncode != 0:
        logger.warning("memory plan for the OOM message failed: %s", (proc.stderr or "").strip()[-300:])
        return None
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return None


def device_memory_gib(device) -> float:
    """The device's memory in GiB: the GPU's, or the machine's RAM for a CPU run."""
    import torch

    if getattr(device, "type", "cpu") == "cuda":
        return torch.cuda.get_device_properties(device).total_memory / 2**30
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
