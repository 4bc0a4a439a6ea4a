"""The device type whose kernel and buffer choices the model makes.

A few choices depend on the device type: the loss head's chunk size and scratch buffers
(`rlab.core.head_loss`) and the CPU's blocked attention kernel (`rlab.core.attention`). The memory
planner (`rlab.memory`) traces the CUDA path on a CPU with fake tensors; inside `planning_for("cuda")`
those choices are CUDA's while the tensors stay on the CPU. Everywhere else the answer is the tensor's
own device type. Code that picks a kernel or a buffer policy by device type asks `device_type` here, so
that the plan counts what the GPU run will do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# A plain module global, not a ContextVar: torch.compile traces through reading a global (and guards on
# it), while `ContextVar.get` breaks the graph at every call. Only the planner sets it, in one thread.
_planned: str | None = None


def device_type(device: Any) -> str:
    """The device type to choose kernels for: the planned one inside `planning_for`, else `device`'s."""
    return _planned or str(getattr(device, "type", device))


@contextmanager
def planning_for(kind: str) -> Iterator[None]:
    """Make `device_type` answer `kind` ("cuda", "cpu") inside this block."""
    global _planned
    before, _planned = _planned, kind
    try:
        yield
    finally:
        _planned = before
