"""Read nanochat d314e96's per-rank optimizer shards into one world-size-free state.

nanochat writes one file per rank, `optim_<step>_rank<r>.pt`. At d314e96 each holds
`[DistAdamW.state_dict(), DistMuon.state_dict()]` (single-process runs: torch AdamW + nanochat's Muon):

* AdamW (ZeRO-2 style): groups `[lm_head], [wte]`; rank r keeps `exp_avg`/`exp_avg_sq` for rows
  `r*R/W .. (r+1)*R/W` of each parameter and the shared `step` count. Concatenating the ranks'
  slices in rank order gives the full moments.
* Muon: one group per parameter shape (shapes sorted; the group's `zero_buffer` has that shape),
  the transformer matrices in model order within a group. The j-th parameter of a group is owned by
  rank `j % W`, and only its owner holds a `momentum_buffer`.

nanochat's Muon momentum ramps 0.85 -> 0.95 over its first 300 steps; the imported Muon groups take
the value nanochat's next step would use (0.95 for any base past step 300).
"""

from __future__ import annotations

from typing import Any

import torch

from rlab.nanochat.optim_state import ADAM_KEYS, FullState, ParamList, ShardMismatch


def nanochat_muon_momentum(step: int) -> float:
    """d314e96's `get_muon_momentum(step)`: 0.85 -> 0.95 linearly over the first 300 steps."""
    frac = min(step / 300, 1.0)
    return (1 - frac) * 0.85 + frac * 0.95


def read_shards(shards: list[Any], params: ParamList) -> FullState | None:
    """d314e96: `[AdamW state, Muon state]` per rank (DistAdamW/DistMuon, or torch AdamW/Muon at 1 rank)."""
    if not all(_is_2025_shard(s) for s in shards):
        return None
    world = len(shards)
    shapes = dict(params)
    adam_names = ["lm_head.weight", "transformer.wte.weight"]  # setup_optimizers' group order
    matrix = [(n, s) for n, s in params if n.startswith("transformer.h.")]
    missing = [n for n in adam_names if n not in shapes]
    if missing or not matrix:
        raise ShardMismatch(
            f"the checkpoint's model has no {', '.join(missing) or 'transformer.h.* matrices'}"
        )
    full = FullState(
        "nanochat DistAdamW+DistMuon (d314e96)" if world > 1 else "nanochat AdamW+Muon (1 process)",
        world,
        step=-1,
    )
    _read_adam(shards, adam_names, shapes, full)
    _read_muon(shards, matrix, shapes, full)
    full.muon_momentum = nanochat_muon_momentum(full.step)
    return full


def _is_2025_shard(shard: Any) -> bool:
    return (
        isinstance(shard, (list, tuple))
        and len(shard) == 2
        and all(isinstance(o, dict) and "state" in o and "param_groups" in o for o in shard)
    )


def _read_adam(shards: list[Any], adam_names: list[str], shapes: dict, full: FullState) -> None:
    """The AdamW moments: each rank's row slices concatenated in rank order; the step count into `full`."""
    world = len(shards)
    adam_groups = shards[0][0]["param_groups"]
    if [len(g["params"]) for g in adam_groups] != [1] * len(adam_names):
        raise ShardMismatch(
            f"AdamW groups hold {[len(g['params']) for g in adam_groups]} parameters, "
            f"expected one each for {', '.join(adam_names)}"
        )
    for gi, name in enumerate(adam_names):
        idx = adam_groups[gi]["params"][0]
        parts = [s[0]["state"].get(idx) for s in shards]
        if any(p is None for p in parts):
            raise ShardMismatch(
                f"AdamW state for {name} missing on rank {[p is None for p in parts].index(True)}"
            )
        steps = {int(p["step"]) for p in parts}
        if len(steps) != 1:
            raise ShardMismatch(f"ranks disagree on the AdamW step count of {name}: {sorted(steps)}")
        step = steps.pop()
        if full.step not in (-1, step):
            raise ShardMismatch(f"AdamW step counts differ between parameters ({full.step} vs {step})")
        full.step = step
        moments = {k: torch.cat([p[k] for p in parts], dim=0) for k in ADAM_KEYS}
        if tuple(moments["exp_avg"].shape) != tuple(shapes[name]):
            raise ShardMismatch(
                f"the AdamW slices of {world} shard(s) make {tuple(moments['exp_avg'].shape)} for {name}, "
                f"the model has {tuple(shapes[name])} (a shard missing, or another world size's files mixed in?)"
            )
        full.adam[name] = moments


def _read_muon(shards: list[Any], matrix: ParamList, shapes: dict, full: FullState) -> None:
    """The Muon momentum of each matrix, from the one rank that owns it."""
    world = len(shards)
    owned: dict[int, list[int]] = {}
    for r, s in enumerate(shards):
        for idx in s[1]["state"]:
            owned.setdefault(int(idx), []).append(r)
    offset = 0
    for group in shards[0][1]["param_groups"]:
        n = len(group["params"])
        key = _group_key(group, shards, offset, n)
        names = [name for name, shape in matrix if _matches(shape, key)]
        if len(names) != n:
            raise ShardMismatch(
                f"a Muon group of {n} parameters ({_key_text(key)}) meets {len(names)} in the model"
            )
        for j, name in enumerate(names):
            holders = owned.get(int(group["params"][j]), [])
            if len(holders) != 1:
                raise ShardMismatch(
                    f"Muon momentum of {name} is on ranks {holders}, expected exactly one "
                    f"(owner rank {j % world})"
                )
            buf = shards[holders[0]][1]["state"][group["params"][j]]["momentum_buffer"]
            if tuple(buf.shape) != tuple(shapes[name]):
                raise ShardMismatch(
                    f"Muon momentum of {name} has shape {tuple(buf.shape)}, the model {tuple(shapes[name])}"
                )
            full.muon[name] = buf
        offset += n
    unmatched = [name for name, _ in matrix if name not in full.muon]
    if unmatched:
        raise ShardMismatch(f"no Muon state for {', '.join(unmatched[:4])}")


def _group_key(group: dict[str, Any], shards: list[Any], offset: int, n: int) -> tuple[str, Any]:
    """DistMuon groups by shape (its zero_buffer has it); nanochat's 1-process Muon by element count."""
    zb = group.get("zero_buffer")
    if isinstance(zb, torch.Tensor):
        return "shape", tuple(zb.shape)
    for s in shards:
        for idx in group["params"]:
            st = s[1]["state"].get(idx)
            if st is not None and "momentum_buffer" in st:
                return "numel", st["momentum_buffer"].numel()
    raise ShardMismatch(f"cannot tell the parameters of Muon group at {offset}..{offset + n - 1} apart")


def _matches(shape: tuple[int, ...], key: tuple[str, Any]) -> bool:
    kind, value = key
    return tuple(shape) == value if kind == "shape" else int(torch.Size(shape).numel()) == value


def _key_text(key: tuple[str, Any]) -> str:
    return f"{key[0]} {key[1]}"
