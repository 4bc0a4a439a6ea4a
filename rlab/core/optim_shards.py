"""Optimizer checkpoints: one file per rank, each rank's share of the state, loadable at any world size.

Rank r writes `optim_{step:06d}_rank{r}.pt` (nanochat's layout), one `rlab.optim/2` payload:

    {"format": "rlab.optim/2", "rank": r, "world_size": W,      # W = files in the set
     "optimizers": [{"kind": "muon" | "adamw",
                     "names": [parameter name per index],
                     "rows": [[start, stop] or None per index],  # AdamW row block this rank kept; None = whole
                     "state_dict": torch state dict of this rank's optimizer}, ...],
     "save_id": "...", "rng": {...}}                               # added by the trainer

An unsharded optimizer (one process, or `train.shard_optimizer: false`) holds everything on every rank
and is written once, by rank 0, as a set of one file.

Loading pieces each parameter's state back together by name (`NamedState`: AdamW row blocks in row
order, Muon momentum from the one file that has it) and gives each optimizer the part its rank keeps
now, so a set written at one world size loads at any other. Files are memory-mapped, so a rank reads
only the pages of the state it keeps. The same path loads rlab's earlier single-file format
(`rlab.optim/1`: the full state of every rank, in rank 0's file) and nanochat's shards
(`rlab.nanochat.optim_import` turns them into a `NamedState`). Every check looks at all parameters
whatever this rank owns, so every rank decides alike whether the state fits.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from rlab.core.muon import ShardedMuon
from rlab.core.sharded_adamw import ShardedAdamW

OPTIM_FORMAT = "rlab.optim/2"
OPTIM_FORMAT_V1 = "rlab.optim/1"  # one world-size-independent file (rlab before sharding)

# parameter name -> pieces (first row, state tensors); a 0-d tensor (AdamW's step) is not cut by rows
Piece = tuple[int, dict[str, Tensor]]
NamedState = dict[str, list[Piece]]


class StateMismatch(ValueError):
    """Saved optimizer state that does not fit the optimizers (another model, a damaged set)."""


def kind(opt: torch.optim.Optimizer) -> str:
    return "muon" if isinstance(opt, torch.optim.Muon) else "adamw"


def _blocks(opt: torch.optim.Optimizer) -> list[tuple[Tensor, tuple[int, int] | None]]:
    """(full parameter, rows this rank keeps or None for all) per parameter index."""
    if isinstance(opt, ShardedAdamW):
        return opt.blocks
    return [(p, None) for g in opt.param_groups for p in g["params"]]


def _kept(opt: torch.optim.Optimizer) -> list[bool]:
    """Per parameter index: does this rank keep its state?"""
    if isinstance(opt, ShardedMuon):
        return [owned for g in opt.param_groups for owned in opt.owns(g)]
    return [True for g in opt.param_groups for _ in g["params"]]


def is_sharded(optimizers: list[torch.optim.Optimizer]) -> bool:
    return any(getattr(o, "world_size", 1) > 1 for o in optimizers)


def writes_file(optimizers: list[torch.optim.Optimizer], rank: int) -> bool:
    """Does this rank write an optimizer file? Every rank when sharded, rank 0 otherwise."""
    return rank == 0 or is_sharded(optimizers)


def optimizer_shard(optimizers: list[torch.optim.Optimizer], rank: int) -> dict[str, Any]:
    """This rank's optimizer file payload (references the live state tensors; torch.save copies them)."""
    sharded = is_sharded(optimizers)
    entries = []
    for opt in optimizers:
        entries.append(
            {
                "kind": kind(opt),
                "names": list(getattr(opt, "param_names", [])),
                "rows": [None if rows is None else list(rows) for _, rows in _blocks(opt)],
                "state_dict": opt.state_dict(),
            }
        )
    return {
        "format": OPTIM_FORMAT,
        "rank": rank if sharded else 0,
        "world_size": max(getattr(o, "world_size", 1) for o in optimizers) if sharded else 1,
        "optimizers": entries,
    }


def is_own_format(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("format") in (OPTIM_FORMAT, OPTIM_FORMAT_V1)


def _entries(payload: dict[str, Any], optimizers: list[torch.optim.Optimizer]) -> list[dict[str, Any]]:
    """The payload's per-optimizer entries; a v1 payload is named by today's optimizers (same build order)."""
    if payload.get("format") == OPTIM_FORMAT:
        return list(payload["optimizers"])
    kinds = [str(k).lower() for k in payload.get("kinds", [])]
    if kinds != [kind(o) for o in optimizers]:
        raise StateMismatch(f"optimizer kinds differ: saved {kinds}, now {[kind(o) for o in optimizers]}")
    entries = []
    for opt, sd in zip(optimizers, payload["optimizers"], strict=True):
        names = list(getattr(opt, "param_names", []))
        entries.append({"kind": kind(opt), "names": names, "rows": [None] * len(names), "state_dict": sd})
    return entries


def named_state(payloads: list[dict[str, Any]], optimizers: list[torch.optim.Optimizer]) -> NamedState:
    """Every file's state, by parameter name, as row pieces (rank order)."""
    named: NamedState = {}
    whole: set[str] = set()  # parameters some file holds in full (replicated AdamW state, Muon momentum)
    for payload in payloads:
        for entry in _entries(payload, optimizers):
            for index, (name, rows) in enumerate(zip(entry["names"], entry["rows"], strict=True)):
                state = entry["state_dict"]["state"].get(index)
                if not state:
                    continue
                if rows is None:
                    if name in whole:
                        if entry["kind"] == "muon":
                            raise StateMismatch(f"Muon momentum of {name} is in more than one file")
                        continue  # replicated AdamW state: every file has the same copy
                    if named.get(name):
                        raise StateMismatch(f"state of {name} is both whole and in row blocks")
                    whole.add(name)
                    named[name] = [(0, state)]
                elif name in whole:
                    raise StateMismatch(f"state of {name} is both whole and in row blocks")
                else:
                    named.setdefault(name, []).append((int(rows[0]), state))
    for pieces in named.values():
        pieces.sort(key=lambda piece: piece[0])
    return named


def _take(pieces: list[Piece], key: str, shape: tuple[int, ...], rows: tuple[int, int] | None) -> Tensor:
    """Rows [start, stop) of `key` (all rows when `rows` is None) cut from the pieces."""
    if not shape:
        return pieces[0][1][key]
    start, stop = rows if rows is not None else (0, shape[0])
    parts = []
    for first, state in pieces:
        t = state[key]
        lo, hi = max(first, start), min(first + t.shape[0], stop)
        if lo < hi:
            parts.append(t[lo - first : hi - first])
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _check(name: str, pieces: list[Piece] | None, key: str, shape: tuple[int, ...]) -> None:
    """The pieces tile `shape` exactly: rows 0..R in order, the other dimensions equal."""
    if not pieces or any(key not in state for _, state in pieces):
        raise StateMismatch(f"no {key} for {name} in the saved state")
    got = [tuple(state[key].shape) for _, state in pieces]
    row = 0
    for (first, _), block in zip(pieces, got, strict=True):
        fits = bool(shape) and len(block) == len(shape) and first == row and block[1:] == shape[1:]
        if not fits and not (not shape and block == () and len(pieces) == 1):
            raise StateMismatch(f"{name}: state of shape {block} (at row {first}) for a parameter of {shape}")
        row += block[0] if block else 1
    if shape and row != shape[0]:
        raise StateMismatch(f"{name}: state covers {row} rows of a parameter of {shape}")


def load_named_state(
    optimizers: list[torch.optim.Optimizer],
    named: NamedState,
    saved_groups: list[list[dict[str, Any]]] | None = None,
    muon_momentum: float | None = None,
) -> int:
    """Give every optimizer its rank's part of `named`; returns the state tensors restored model-wide.

    `saved_groups` (per optimizer): hyperparameters to restore (each group's `initial_lr` is kept from
    the current config); None keeps the current ones. `muon_momentum` overrides Muon's momentum.
    All checks run before anything is loaded: never a half-loaded optimizer.
    """
    staged = []
    count = 0
    for i, opt in enumerate(optimizers):
        sd = opt.state_dict()
        is_muon = kind(opt) == "muon"
        names = list(getattr(opt, "param_names", []))
        blocks, keep = _blocks(opt), _kept(opt)
        state: dict[int, dict[str, Tensor]] = {}
        for index, name in enumerate(names):
            shape = tuple(blocks[index][0].shape)
            pieces = named.get(name)
            keys = ("momentum_buffer",) if is_muon else ("exp_avg", "exp_avg_sq")
            for key in keys:
                _check(name, pieces, key, shape)
            assert pieces is not None
            count += len(keys)
            if not keep[index]:
                continue
            entry = {k: _take(pieces, k, shape, blocks[index][1]).clone() for k in keys}
            if not is_muon:
                steps = {float(st["step"]) for _, st in pieces if "step" in st}
                if len(steps) != 1:
                    raise StateMismatch(f"AdamW step counts of {name} disagree: {sorted(steps)}")
                entry["step"] = torch.tensor(steps.pop(), dtype=torch.float32)
            state[index] = entry
        sd["state"] = state
        if saved_groups is not None:
            groups = saved_groups[i]
            if [len(g["params"]) for g in groups] != [len(g["params"]) for g in sd["param_groups"]]:
                raise StateMismatch("the saved parameter groups differ from the optimizer's")
            sd["param_groups"] = [
                {**saved, "params": now["params"]}
                for saved, now in zip(groups, sd["param_groups"], strict=True)
            ]
        staged.append((opt, sd, is_muon))
    for opt, sd, is_muon in staged:
        peaks = [g["initial_lr"] for g in opt.param_groups]
        opt.load_state_dict(sd)
        for g, peak in zip(opt.param_groups, peaks, strict=True):
            g["initial_lr"] = peak
            if is_muon and muon_momentum is not None:
                g["momentum"] = muon_momentum
    return count


def load_optimizer_state(optimizers: list[torch.optim.Optimizer], payloads: list[dict[str, Any]]) -> None:
    """Restore a set of rlab optimizer files (any world size, or the v1 single file) into `optimizers`."""
    first = _entries(payloads[0], optimizers)
    if [e["kind"] for e in first] != [kind(o) for o in optimizers]:
        raise StateMismatch(
            f"optimizer kinds differ: saved {[e['kind'] for e in first]}, now {[kind(o) for o in optimizers]}"
        )
    for entry, opt in zip(first, optimizers, strict=True):
        if list(entry["names"]) != list(getattr(opt, "param_names", [])):
            raise StateMismatch(f"the saved {entry['kind']} parameters differ from the model's")
    saved_groups = [e["state_dict"]["param_groups"] for e in first]
    load_named_state(optimizers, named_state(payloads, optimizers), saved_groups)
