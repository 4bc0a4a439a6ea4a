"""Muon with its state sharded across ranks and its Newton-Schulz step stacked per shape (and compiled).

`ShardedMuon` is `torch.optim.Muon` (same constructor, hyperparameters, state-dict layout and update
rule) with its own `step`:

* **Owner computes.** Each matrix belongs to one rank (`rlab.core.optim_sharding.muon_owners`: dealt
  round-robin over the ranks in shape buckets, like nanochat's DistMuon). Only the owner keeps its
  momentum buffer and computes its update; then each shape bucket is all-gathered, one matrix per rank
  per round, straight into the parameters, so every replica ends the step with the same weights.
* **Gradients stay with DDP.** DistMuon reduce-scatters the gradients itself; here DDP has already
  all-reduced (averaged) every gradient, in buckets that overlap the backward, and the trainer needs
  the full averaged gradients before the step anyway (the global grad norm for clipping and for
  skipping non-finite or exploding steps). Taking the matrices out of DDP would mean rebuilding that
  norm from shards and a second gradient path. Keeping DDP's all-reduce and gathering the updated
  weights costs one more pass of the matrices over the network per step and changes nothing else.
* **Stacked, compiled Newton-Schulz.** The owner stacks the updates of its matrices of one shape into
  one (K, m, n) tensor and orthogonalises them in a single batched call (`newton_schulz`), compiled with
  `torch.compile(dynamic=False)` when the trainer compiles the model. Eager, it runs exactly the bf16
  ops `torch.optim.Muon` runs one matrix at a time (`baddbmm` is its `addmm`, batched), so at world
  size 1 on CPU the update is bit-identical to torch's; compiled, the two agree to bf16 rounding.

At world size 1 the rank owns every matrix and nothing is communicated.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from rlab.core.optim_sharding import muon_owners, shape_buckets

logger = logging.getLogger(__name__)

_compiled: list[Callable[..., Tensor]] = []  # the compiled `newton_schulz`, made on first use


def newton_schulz(G: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float) -> Tensor:
    """(K, m, n) -> (K, m, n) bf16: each matrix orthogonalised by `steps` quintic Newton-Schulz iterations.

    Batched `torch.optim.Muon` (its `_zeropower_via_newtonschulz`, op for op): a tall stack is
    transposed, each matrix is scaled to spectral norm <= 1 by its Frobenius norm, then
    X <- a X + (b A + c A^2) X with A = X X^T.
    """
    a, b, c = coefficients
    X = G.bfloat16()
    tall = G.size(-2) > G.size(-1)
    if tall:
        X = X.mT
    X = X / X.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = X @ X.mT  # (K, m, m)
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)  # b A + c A @ A
        X = torch.baddbmm(X, poly, X, beta=a)  # a X + poly @ X
    return X.mT if tall else X


def compiled_newton_schulz() -> Callable[..., Tensor]:
    """`newton_schulz` under torch.compile (one graph per stacked shape; made once per process)."""
    if not _compiled:
        _compiled.append(torch.compile(newton_schulz, dynamic=False))
    return _compiled[0]


def adjusted_lr(lr: float, adjust_lr_fn: str | None, shape: Sequence[int]) -> float:
    """torch.optim.Muon's shape scaling: sqrt(max(1, rows/cols)) ("original"), or Moonshot's 0.2 sqrt(max)."""
    rows, cols = shape[0], shape[1]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class ShardedMuon(torch.optim.Muon):
    """torch.optim.Muon whose matrices are each updated by one owning rank, stacked per shape.

    `rank`/`world_size` place this process (a process group must exist when `world_size` > 1);
    `compile_ns` compiles the Newton-Schulz step; `param_names` name the parameters (in group order) for
    checkpoints. Every rank lists every matrix in its param groups (so
    `zero_grad`, LR changes and the state-dict indices are the same everywhere); `self.state` holds
    momentum only for the matrices this rank owns.
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        *,
        rank: int = 0,
        world_size: int = 1,
        compile_ns: bool = False,
        param_names: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(params, **kwargs)
        self.rank, self.world_size, self.compile_ns = rank, world_size, compile_ns
        self.param_names = list(param_names)  # in param-group order: how checkpoints name the state

    def owns(self, group: dict[str, Any]) -> list[bool]:
        """For each parameter of `group`: does this rank keep its state and compute its update?"""
        return [
            o == self.rank for o in muon_owners([tuple(p.shape) for p in group["params"]], self.world_size)
        ]

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        pending = []
        for group in self.param_groups:
            params = group["params"]
            owners = muon_owners([tuple(p.shape) for p in params], self.world_size)
            for bucket in shape_buckets([tuple(p.shape) for p in params]):
                mine = [params[i] for i in bucket if owners[i] == self.rank and params[i].grad is not None]
                if mine:
                    self._update(group, mine)
                if self.world_size > 1:
                    pending += self._share([params[i] for i in bucket], [owners[i] for i in bucket])
        for work in pending:
            work.wait()
        return loss

    def _update(self, group: dict[str, Any], params: list[Tensor]) -> None:
        """Momentum, one stacked Newton-Schulz, decoupled weight decay and the shape-scaled step."""
        momentum = group["momentum"]
        updates = []
        for p in params:
            grad, state = p.grad, self.state[p]
            assert grad is not None  # the caller passes parameters with gradients only
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - momentum)
            updates.append(grad.lerp(buf, momentum) if group["nesterov"] else buf)
        ortho = self._orthogonalize(torch.stack(updates), group)  # (K, m, n) bf16
        lr = float(group["lr"])
        step = adjusted_lr(lr, group["adjust_lr_fn"], params[0].shape)
        for p, update in zip(params, ortho, strict=True):
            p.mul_(1 - lr * group["weight_decay"])
            p.add_(update, alpha=-step)

    def _orthogonalize(self, stacked: Tensor, group: dict[str, Any]) -> Tensor:
        args = (stacked, tuple(group["ns_coefficients"]), int(group["ns_steps"]), float(group["eps"]))
        if self.compile_ns:
            try:
                return compiled_newton_schulz()(*args)
            except torch._dynamo.exc.TorchDynamoException as exc:  # a compiler failure, not an OOM
                # safe on one rank alone: each matrix's update is computed by its owner only
                logger.warning("compiling Muon's Newton-Schulz failed (%s); running it eagerly", exc)
                self.compile_ns = False
        return newton_schulz(*args)

    def _share(self, members: list[Tensor], owners: list[int]) -> list[Any]:
        """All-gather a shape bucket's updated matrices from their owners, one matrix per rank per round
        (consecutive matrices of a bucket have distinct owners)."""

        works = []
        for base in range(0, len(members), self.world_size):
            outputs = [torch.empty_like(members[0]) for _ in range(self.world_size)]  # padding for idle ranks
            for p, owner in zip(
                members[base : base + self.world_size], owners[base : base + self.world_size]
            ):
                outputs[owner] = p
            works.append(dist.all_gather(outputs, outputs[self.rank], async_op=True))
        return works
