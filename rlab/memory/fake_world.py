"""Rank 0 of a pretend process group, so code that shards by rank runs as one rank of a real job would.

torch's fake process group (the `fake` backend) accepts every collective and moves no data. Under it,
the optimizers' own code (`rlab.core.muon.ShardedMuon`, `rlab.core.sharded_adamw.ShardedAdamW`, or
nanochat's DistMuon/DistAdamW) keeps exactly the state rank 0 of `world_size` ranks keeps, and allocates
the buffers its collectives need, while the memory plan counts them under fake tensors.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fake_world(world_size: int, *, environ: bool = False, compile_off: bool = False) -> Iterator[None]:
    """A fake process group of `world_size` ranks with this process as rank 0, torn down on exit.

    `environ` also exports torchrun's RANK / LOCAL_RANK / WORLD_SIZE (code that reads them, such as
    nanochat's); `compile_off` disables torch.compile inside (code that compiles functions it then runs on
    fake tensors). Nothing is done when `world_size` is 1 or a process group already exists.
    """
    import torch
    import torch.distributed as dist

    if world_size == 1 or (dist.is_available() and dist.is_initialized()):
        yield
        return
    import torch.testing._internal.distributed.fake_pg  # noqa: F401 - registers the "fake" backend

    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(world_size)} if environ else {}
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    dist.init_process_group("fake", store=dist.HashStore(), rank=0, world_size=world_size)
    disabled = torch._dynamo.config.disable
    torch._dynamo.config.disable = compile_off or disabled
    try:
        with warnings.catch_warnings():  # torch's renames of collectives the traced code still calls
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed")
            yield
    finally:
        torch._dynamo.config.disable = disabled
        dist.destroy_process_group()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
