"""Read nanochat-2026's per-rank `MuonAdamW` shards (nanochat 92d63d4) into one world-size-free state.

Each rank's `optim_<step>_rank<r>.pt` is one `MuonAdamW.state_dict()`: `param_groups` carry a
`kind` ("adamw" / "muon") and the parameter indices; the indices number the parameters in group order
as `GPT.setup_optimizer` builds them:

* AdamW groups, in this order: [lm_head], [wte], [value_embeds.* by layer], [resid_lambdas],
  [x0_lambdas], [smear_gate.weight, smear_lambda, backout_lambda]. A parameter of fewer than 1024
  elements has its full `exp_avg`/`exp_avg_sq` on every rank (its gradient is all-reduced); a larger
  one keeps rows `r*R/W .. (r+1)*R/W` on rank r (ZeRO-2), so the ranks' slices concatenate.
* Muon groups: the transformer matrices (value gates included) grouped by shape, shapes sorted,
  model order within a group. The group's state sits on its first parameter's index: a stacked
  `momentum_buffer` of `ceil(K/W)` parameters per rank (rank r owns parameters r*chunk ..), and a
  factored `second_momentum_buffer` (NorMuon's variance estimate).

What rlab can use: every AdamW moment and step count, and every Muon momentum buffer (the same
Nesterov lerp as torch's Muon). rlab's Muon has no second-moment (variance reduction) state, so that
buffer is dropped and the import says so; rlab's Muon then runs its own update rule from the imported
momentum. The momentum coefficient is what nanochat's next step would use before its warmdown
(0.85 -> 0.97 over the first 400 steps).
"""

from __future__ import annotations

from typing import Any

import torch

from rlab.nanochat.optim_state import ADAM_KEYS, FullState, ParamList, ShardMismatch

SMALL_PARAM = 1024  # nanochat all-reduces (does not shard) AdamW params with fewer elements


def nanochat_2026_muon_momentum(step: int) -> float:
    """92d63d4's `get_muon_momentum(step)` before the warmdown: 0.85 -> 0.97 over the first 400 steps."""
    frac = min(step / 400, 1.0)
    return (1 - frac) * 0.85 + frac * 0.97


def adamw_names(params: ParamList) -> list[list[str]]:
    """The AdamW groups of nanochat-2026's `setup_optimizer`, as parameter names."""
    names = [n for n, _ in params]
    value_embeds = sorted(
        (n for n in names if n.startswith("value_embeds.")), key=lambda n: int(n.split(".")[1])
    )
    return [
        ["lm_head.weight"],
        ["transformer.wte.weight"],
        value_embeds,
        ["resid_lambdas"],
        ["x0_lambdas"],
        ["smear_gate.weight", "smear_lambda", "backout_lambda"],
    ]


def read_shards(shards: list[Any], params: ParamList) -> FullState | None:
    """nanochat 92d63d4: one `MuonAdamW.state_dict()` per rank; None for any other format."""
    if not all(_is_2026_shard(s) for s in shards):
        return None
    shapes = dict(params)
    groups = shards[0]["param_groups"]
    if any([g["params"] for g in s["param_groups"]] != [g["params"] for g in groups] for s in shards[1:]):
        raise ShardMismatch("the ranks' shards list different parameter groups")
    adam_groups = [g for g in groups if g["kind"] == "adamw"]
    expected = adamw_names(params)
    if [len(g["params"]) for g in adam_groups] != [len(names) for names in expected]:
        raise ShardMismatch(
            f"AdamW groups hold {[len(g['params']) for g in adam_groups]} parameters; a "
            f"nanochat-2026 model of these keys has {[len(n) for n in expected]}"
        )
    full = FullState("nanochat MuonAdamW (92d63d4)", len(shards), step=-1)
    for group, names in zip(adam_groups, expected, strict=True):
        for idx, name in zip(group["params"], names, strict=True):
            if name not in shapes:
                raise ShardMismatch(f"the checkpoint's model has no {name}")
            full.adam[name] = _adam_moments(shards, idx, name, shapes[name], full)
    dropped = _read_muon(shards, [g for g in groups if g["kind"] == "muon"], params, full)
    full.muon_momentum = nanochat_2026_muon_momentum(full.step)
    if dropped:
        full.notes.append("NorMuon second-moment buffers dropped (rlab's Muon keeps none)")
    return full


def _is_2026_shard(shard: Any) -> bool:
    return (
        isinstance(shard, dict)
        and isinstance(shard.get("param_groups"), list)
        and bool(shard["param_groups"])
        and all(isinstance(g, dict) and g.get("kind") in ("adamw", "muon") for g in shard["param_groups"])
    )


def _read_muon(shards: list[Any], muon_groups: list[dict], params: ParamList, full: FullState) -> int:
    """The Muon momentum of each matrix, unstacked from its shape group's per-rank chunks; returns how many
    NorMuon second-moment buffers were dropped."""
    world = len(shards)
    matrix = [(n, s) for n, s in params if n.startswith("transformer.h.")]
    by_shape = {shape: [n for n, s in matrix if s == shape] for shape in sorted({s for _, s in matrix})}
    if [len(g["params"]) for g in muon_groups] != [len(v) for v in by_shape.values()]:
        raise ShardMismatch(
            f"Muon groups hold {[len(g['params']) for g in muon_groups]} parameters; the "
            f"model's matrices by shape make {[len(v) for v in by_shape.values()]}"
        )
    dropped = 0
    for group, (shape, names) in zip(muon_groups, by_shape.items(), strict=True):
        idx = group["params"][0]
        states = [s["state"].get(idx) for s in shards]
        if any(st is None or "momentum_buffer" not in st for st in states):
            raise ShardMismatch(f"Muon momentum for the {shape} group missing on a rank")
        stacked = torch.cat([st["momentum_buffer"] for st in states], dim=0)
        if tuple(stacked.shape[1:]) != tuple(shape) or stacked.shape[0] < len(names):
            raise ShardMismatch(
                f"Muon momentum of the {shape} group has shape {tuple(stacked.shape)} over "
                f"{world} rank(s), expected at least {len(names)} x {shape}"
            )
        for j, name in enumerate(names):
            full.muon[name] = stacked[j].clone()
        dropped += sum(1 for st in states if "second_momentum_buffer" in st)
    return dropped


def _adam_moments(shards: list[Any], idx: int, name: str, shape: tuple[int, ...], full: FullState) -> dict:
    parts = [s["state"].get(idx) for s in shards]
    if any(p is None for p in parts):
        raise ShardMismatch(
            f"AdamW state for {name} missing on rank {[p is None for p in parts].index(True)}"
        )
    steps = {int(p["step"]) for p in parts}
    if len(steps) != 1 or full.step not in (-1, *steps):
        raise ShardMismatch(f"AdamW step counts disagree ({name}: {sorted(steps)}, others: {full.step})")
    full.step = steps.pop()
    numel = int(torch.Size(shape).numel())
    if numel < SMALL_PARAM or len(parts) == 1:
        moments = {k: parts[0][k] for k in ADAM_KEYS}
    else:
        moments = {k: torch.cat([p[k] for p in parts], dim=0) for k in ADAM_KEYS}
    if tuple(moments["exp_avg"].shape) != tuple(shape):
        raise ShardMismatch(
            f"the AdamW state of {len(parts)} shard(s) makes {tuple(moments['exp_avg'].shape)} "
            f"for {name}, the model has {tuple(shape)} (a shard missing or from another run?)"
        )
    return moments
