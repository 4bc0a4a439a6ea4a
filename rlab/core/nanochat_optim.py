"""Rebuild a full optimizer state from nanochat's per-rank shards and load it into rlab's optimizers.

nanochat writes one file per rank, `optim_<step>_rank<r>.pt`. At d314e96 each holds
`[DistAdamW.state_dict(), DistMuon.state_dict()]` (single-process runs: torch AdamW + nanochat's Muon):

* AdamW (ZeRO-2 style): groups `[lm_head], [wte]`; rank r keeps `exp_avg`/`exp_avg_sq` for rows
  `r*R/W .. (r+1)*R/W` of each parameter and the shared `step` count. Concatenating the ranks'
  slices in rank order gives the full moments.
* Muon: one group per parameter shape (shapes sorted; the group's `zero_buffer` has that shape),
  the transformer matrices in model order within a group. The j-th parameter of a group is owned by
  rank `j % W`, and only its owner holds a `momentum_buffer`.

So any world size maps onto one world-size-free state (the AdamW moments concatenated, each momentum
buffer taken from its owner), of which each rank of the rlab run takes its own share. rlab's optimizers (`rlab.core.optim`) run the same update rules:
torch.optim.AdamW with nanochat's betas/eps (bias correction continues from nanochat's step count)
and torch.optim.Muon (same Nesterov lerp, same quintic Newton-Schulz in bf16, same shape scaling).
nanochat's Muon momentum ramps 0.85 -> 0.95 over its first 300 steps; the imported Muon groups take
the value nanochat's next step would use (0.95 for any base past step 300). The LR follows the rlab
run's own schedule; nanochat's schedule is a function of its `num_iterations` and is not carried over.

Readers are tried in order (`READERS`), each returning None for a format it does not recognise;
nanochat-2026's `MuonAdamW` shards are read by `rlab.core.nanochat_optim_2026`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rlab.core.checkpoint_meta import OptimizerImport
from rlab.paths import model_file, optim_file

logger = logging.getLogger(__name__)

ADAM_KEYS = ("exp_avg", "exp_avg_sq")


class ShardMismatch(Exception):
    """The shards are nanochat's but do not fit the model (or each other); the message says how."""


@dataclass
class FullState:
    """World-size-free optimizer state, keyed by nanochat parameter name."""

    format: str
    world_size: int
    step: int
    adam: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # name -> exp_avg, exp_avg_sq
    muon: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> momentum_buffer
    muon_momentum: float | None = None  # what nanochat's next step would use
    notes: list[str] = field(default_factory=list)  # state the format has and rlab cannot use


@dataclass
class ImportReport:
    """What `import_nanochat_optimizer` did, for the log and the checkpoint meta."""

    restored: bool
    reason: str
    format: str | None = None
    world_size: int | None = None
    nanochat_step: int | None = None
    muon_momentum: float | None = None
    tensors: int = 0
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if not self.restored:
            return f"not imported: {self.reason}"
        return (
            f"restored from nanochat's {self.world_size} per-rank shard(s) ({self.format}, step "
            f"{self.nanochat_step}, {self.tensors} tensors, Muon momentum {self.muon_momentum:.4g})"
            + "".join(f"; {n}" for n in self.notes)
        )

    def to_meta(self) -> OptimizerImport:
        """The meta's `optimizer.import` record."""
        return OptimizerImport(
            restored=self.restored,
            reason=self.reason,
            format=self.format,
            world_size=self.world_size,
            nanochat_step=self.nanochat_step,
            muon_momentum=self.muon_momentum,
            notes=self.notes,
        )


# name and shape of every parameter in nanochat's model order (the model file's key order)
ParamList = list[tuple[str, tuple[int, ...]]]
Reader = Callable[[list[Any], ParamList], "FullState | None"]


def nanochat_muon_momentum(step: int) -> float:
    """d314e96's `get_muon_momentum(step)`: 0.85 -> 0.95 linearly over the first 300 steps."""
    frac = min(step / 300, 1.0)
    return (1 - frac) * 0.85 + frac * 0.95


def read_dist_adamw_muon(shards: list[Any], params: ParamList) -> FullState | None:
    """d314e96: `[AdamW state, Muon state]` per rank (DistAdamW/DistMuon, or torch AdamW/Muon at 1 rank)."""
    if not all(
        isinstance(s, (list, tuple))
        and len(s) == 2
        and all(isinstance(o, dict) and "state" in o and "param_groups" in o for o in s)
        for s in shards
    ):
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

    adam_groups = shards[0][0]["param_groups"]
    if [len(g["params"]) for g in adam_groups] != [1] * len(adam_names):
        raise ShardMismatch(
            f"AdamW groups hold {[len(g['params']) for g in adam_groups]} parameters, "
            f"expected one each for {', '.join(adam_names)}"
        )
    full = FullState(
        "nanochat DistAdamW+DistMuon (d314e96)" if world > 1 else "nanochat AdamW+Muon (1 process)",
        world,
        step=-1,
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

    muon_groups = shards[0][1]["param_groups"]
    owned: dict[int, list[int]] = {}
    for r, s in enumerate(shards):
        for idx in s[1]["state"]:
            owned.setdefault(int(idx), []).append(r)
    offset = 0
    for group in muon_groups:
        n = len(group["params"])
        key = _group_key(group, shards, offset, n)
        names = [name for name, shape in matrix if _matches(shape, key)]
        if len(names) != n:
            raise ShardMismatch(
                f"a Muon group of {n} parameters ({_key_text(key)}) meets {len(names)} in the model"
            )
        for j, name in enumerate(names):
            idx = group["params"][j]
            holders = owned.get(int(idx), [])
            if len(holders) != 1:
                raise ShardMismatch(
                    f"Muon momentum of {name} is on ranks {holders}, expected exactly one "
                    f"(owner rank {j % world})"
                )
            buf = shards[holders[0]][1]["state"][idx]["momentum_buffer"]
            if tuple(buf.shape) != tuple(shapes[name]):
                raise ShardMismatch(
                    f"Muon momentum of {name} has shape {tuple(buf.shape)}, the model {tuple(shapes[name])}"
                )
            full.muon[name] = buf
        offset += n
    unmatched = [name for name, _ in matrix if name not in full.muon]
    if unmatched:
        raise ShardMismatch(f"no Muon state for {', '.join(unmatched[:4])}")
    full.muon_momentum = nanochat_muon_momentum(full.step)
    return full


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


def _read_2026(shards: list[Any], params: ParamList) -> FullState | None:
    from rlab.core.nanochat_optim_2026 import read_muon_adamw  # imports this module's types

    return read_muon_adamw(shards, params)


READERS: list[Reader] = [read_dist_adamw_muon, _read_2026]


def load_shards(ckpt_dir: Path, step: int) -> list[Any]:
    """Every rank's shard, rank 0 first; ShardMismatch when none, a gap, or an unreadable file."""
    ckpt_dir = Path(ckpt_dir)
    found = sorted(
        int(p.stem.rsplit("rank", 1)[1])
        for p in ckpt_dir.glob(f"optim_{step:06d}_rank*.pt")
        if p.stem.rsplit("rank", 1)[1].isdigit()
    )
    if not found:
        raise ShardMismatch(f"no optimizer shards optim_{step:06d}_rank*.pt in {ckpt_dir}")
    if found != list(range(len(found))):
        gaps = sorted(set(range(max(found) + 1)) - set(found))
        raise ShardMismatch(
            f"optimizer shard(s) of rank {', '.join(map(str, gaps))} missing "
            f"(found ranks {', '.join(map(str, found))})"
        )
    shards = []
    for r in found:
        path = optim_file(ckpt_dir, step, r)
        try:
            shards.append(torch.load(path, map_location="cpu", weights_only=True))
        except Exception as exc:  # noqa: BLE001 - truncated file, foreign pickle, ...: all mean "cannot import"
            raise ShardMismatch(f"cannot read {path.name}: {str(exc).splitlines()[0][:200]}") from None
    return shards


def checkpoint_params(ckpt_dir: Path, step: int) -> ParamList:
    """(name, shape) of the checkpoint's tensors in file order (memory-mapped: nothing is read in full)."""
    state = torch.load(model_file(Path(ckpt_dir), step), map_location="cpu", mmap=True, weights_only=True)
    return [(k.removeprefix("_orig_mod."), tuple(v.shape)) for k, v in state.items()]


def apply_full_state(full: FullState, model: nn.Module, optimizers: list[torch.optim.Optimizer]) -> int:
    """Load `full` into rlab's optimizers (AdamW: moments + step; Muon: momentum), each rank its own share
    (`rlab.core.optim_shards.load_named_state`); returns the tensors restored model-wide."""
    from rlab.core.optim_shards import NamedState, StateMismatch, load_named_state

    step = torch.tensor(float(full.step), dtype=torch.float32)
    named: NamedState = {name: [(0, {"momentum_buffer": buf})] for name, buf in full.muon.items()}
    named.update({name: [(0, {"step": step, **moments})] for name, moments in full.adam.items()})
    try:
        return load_named_state(optimizers, named, muon_momentum=full.muon_momentum)
    except StateMismatch as exc:
        raise ShardMismatch(str(exc)) from None


def import_nanochat_optimizer(
    ckpt_dir: Path, step: int, model: nn.Module, optimizers: list[torch.optim.Optimizer]
) -> ImportReport:
    """Rebuild the optimizer state of nanochat's checkpoint `step` in `ckpt_dir` into `optimizers`.

    Never raises for bad or missing shards: the report says why nothing was loaded (the optimizers
    are then untouched, i.e. fresh).
    """
    try:
        shards = load_shards(ckpt_dir, step)
        params = checkpoint_params(ckpt_dir, step)
        for reader in READERS:
            full = reader(shards, params)
            if full is not None:
                break
        else:
            raise ShardMismatch("the shards are in no optimizer format rlab knows")
        count = apply_full_state(full, model, optimizers)
    except ShardMismatch as exc:
        logger.warning("nanochat optimizer state not imported from %s step %d: %s", ckpt_dir, step, exc)
        return ImportReport(False, str(exc))
    report = ImportReport(
        True, "imported", full.format, full.world_size, full.step, full.muon_momentum, count, full.notes
    )
    logger.info("optimizer %s", report.describe())
    return report
