"""Optimizers for the GPT: Muon for block matrices, AdamW for the rest (torch's own, sharded across ranks).

Per-group learning rates follow nanochat: Muon at `matrix_lr` (scaled by sqrt(max(1, rows/cols))
inside Muon, its "original" adjustment), AdamW at `embedding_lr` for the token embedding and
`unembedding_lr` for lm_head, both scaled by (n_embd / 768)^-0.5 so that the tuned values carry
over across widths. AdamW uses betas (0.8, 0.95), eps 1e-10 and no weight decay, as nanochat does.

Each group remembers its peak LR as `initial_lr`; the schedule sets `lr = initial_lr * mult`.

A nanochat-2026 model has more AdamW groups (`GPT.parameter_groups`), set up as nanochat 92d63d4's
`setup_optimizer` does (`ADAMW_GROUPS`): value embeddings at half the embedding LR, resid_lambdas at
1% of `scalar_lr`, x0_lambdas at `scalar_lr` with beta1 0.96, the smear/backout scalars at 0.2, and
that version's betas and decoupled weight decay for its embedding and lm_head groups.

Both are sharded across ranks (`rlab.core.muon.ShardedMuon`, `rlab.core.sharded_adamw.ShardedAdamW`,
ownership in `rlab.core.optim_sharding`): each rank keeps and computes only its share of the state
(about 1/W of it). At world size 1, or with `train.shard_optimizer: false`, they are torch's Muon and
fused AdamW with every rank holding everything. Checkpoints keep one optimizer file per rank and
load at any world size (`rlab.core.optim_shards`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from rlab.core.muon import ShardedMuon
from rlab.core.sharded_adamw import ShardedAdamW
from rlab.spec.train import LRSpec

if TYPE_CHECKING:
    from rlab.core.gpt import GPT

logger = logging.getLogger(__name__)

ADAMW_BETAS = (0.8, 0.95)
ADAMW_EPS = 1e-10
MUON_MOMENTUM = 0.95
REFERENCE_WIDTH = 768  # nanochat tuned its AdamW LRs at this width


def _adamw_fused_ok(params: list[nn.Parameter]) -> bool:
    """Fused AdamW exists for CUDA and (newer torch) CPU float tensors."""
    devices = {p.device.type for p in params}
    return devices <= {"cuda", "cpu"} and all(p.dtype in (torch.float32, torch.bfloat16) for p in params)


# Per AdamW group: (peak LR from the spec, LR multiplier, scaled by width?, betas, weight decay)
_AdamGroup = tuple[str, float, bool, tuple[float, float], float]
ADAMW_GROUPS: dict[str, dict[str, _AdamGroup]] = {
    "nanochat-2025": {  # nanochat d314e96 (and rlab's from-scratch models)
        "embedding": ("embedding_lr", 1.0, True, ADAMW_BETAS, 0.0),
        "lm_head": ("unembedding_lr", 1.0, True, ADAMW_BETAS, 0.0),
    },
    "nanochat-2026": {  # nanochat 92d63d4 GPT.setup_optimizer
        "lm_head": ("unembedding_lr", 1.0, True, (0.8, 0.96), 0.01),
        "embedding": ("embedding_lr", 1.0, True, (0.8, 0.995), 0.001),
        "value_embeds": ("embedding_lr", 0.5, True, (0.8, 0.995), 0.01),
        "resid": ("scalar_lr", 0.01, False, (0.8, 0.95), 0.05),
        "x0": ("scalar_lr", 1.0, False, (0.96, 0.95), 0.0),
        "smear": ("smear_lr", 1.0, False, (0.8, 0.95), 0.0),
    },
}
SMEAR_LR = 0.2  # nanochat 92d63d4: a fixed LR for smear_gate, smear_lambda and backout_lambda


def build_optimizers(
    model: GPT,
    lr: LRSpec,
    n_embd: int,
    *,
    rank: int = 0,
    world_size: int = 1,
    compile_ns: bool = False,
) -> list[torch.optim.Optimizer]:
    """[Muon over the matrix group, AdamW over embedding + lm_head (+ any other group)].

    `rank`/`world_size` shard the state across a process group (1 = every rank keeps all of it);
    `compile_ns` compiles Muon's Newton-Schulz step.
    """
    groups: dict[str, list[nn.Parameter]] = model.parameter_groups()
    all_params = {id(p) for p in model.parameters()}
    grouped = [id(p) for ps in groups.values() for p in ps]
    if sorted(grouped) != sorted(all_params):
        raise RuntimeError("parameter_groups() must cover every parameter exactly once")  # internal invariant
    names = {id(p): n for n, p in model.named_parameters()}

    width_scale = (n_embd / REFERENCE_WIDTH) ** -0.5
    settings = ADAMW_GROUPS[getattr(getattr(model, "config", None), "architecture", "nanochat-2025")]
    adam_groups: list[dict[str, Any]] = []
    for name, params in groups.items():
        if name == "matrix" or not params:
            continue
        lr_name, mult, scaled, betas, wd = settings[name]
        base = SMEAR_LR if lr_name == "smear_lr" else getattr(lr, lr_name)
        group_lr = base * mult * (width_scale if scaled else 1.0)
        adam_groups.append(
            {
                "params": params,
                "lr": group_lr,
                "initial_lr": group_lr,
                "name": name,
                "betas": betas,
                "weight_decay": wd,
            }
        )
    adam_params: list[nn.Parameter] = [p for g in adam_groups for p in g["params"]]
    optimizers: list[torch.optim.Optimizer] = []
    matrix = groups.get("matrix", [])
    if matrix:
        muon = ShardedMuon(
            matrix,
            lr=lr.matrix_lr,
            weight_decay=lr.weight_decay,
            momentum=MUON_MOMENTUM,
            nesterov=True,
            compile_ns=compile_ns,
            param_names=[names[id(p)] for p in matrix],
            rank=rank,
            world_size=world_size,
        )
        for g in muon.param_groups:
            g["initial_lr"] = lr.matrix_lr
            g["name"] = "matrix"
        optimizers.append(muon)
    if adam_groups:
        adam_names = [names[id(p)] for p in adam_params]

        def adamw(fused: bool | None) -> ShardedAdamW:
            return ShardedAdamW(
                adam_groups,
                betas=ADAMW_BETAS,
                eps=ADAMW_EPS,
                weight_decay=0.0,
                fused=fused,
                param_names=adam_names,
                rank=rank,
                world_size=world_size,
            )

        try:
            optimizers.append(adamw(_adamw_fused_ok(adam_params) or None))
        except RuntimeError as exc:  # fused kernel missing on this build/device
            logger.warning("fused AdamW unavailable (%s); using the foreach implementation", exc)
            optimizers.append(adamw(None))
    return optimizers


def set_lr_multiplier(optimizers: list[torch.optim.Optimizer], mult: float) -> None:
    """lr = initial_lr * mult for every group."""
    for opt in optimizers:
        for g in opt.param_groups:
            g["lr"] = g["initial_lr"] * mult
