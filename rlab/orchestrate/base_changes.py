"""What a continuation changes against the run that trained its base: one line per setting, the base's value beside it.

Sequence length, tokens per optimizer step, steps, the LR schedule (peak LRs, warmup, decay) and where the
optimizer state comes from. The base's values come from its checkpoint meta: nanochat's `user_config` (its
command-line arguments) or, for a base rlab trained, the `run_config` it recorded; what neither records is
"not recorded", never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlab.core.checkpoint_meta import CheckpointMeta
from rlab.paths import BaseLayout, optim_ranks
from rlab.spec.experiment import ExperimentSpec

NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Change:
    """One setting of the plan next to the base run's."""

    setting: str
    planned: str
    base: str

    @property
    def changed(self) -> bool:
        return self.base not in (NOT_RECORDED, "") and self.planned != self.base

    def line(self) -> str:
        if not self.base:  # a setting of the continuation alone (where its optimizer state comes from)
            return f"{self.setting}: {self.planned}"
        mark = "changed" if self.changed else "same" if self.base != NOT_RECORDED else "?"
        return f"{self.setting}: {self.planned} (base: {self.base}; {mark})"


def base_changes(spec: ExperimentSpec, meta: CheckpointMeta, base: BaseLayout) -> list[Change]:
    """The plan's sequence length, tokens/step, steps, LR schedule and optimizer-state source vs the base's.
    `spec` is resolved against the base (`rlab.orchestrate.plan.resolve_lengths`)."""
    train, lr = spec.train, spec.train.lr
    recorded = _recorded(meta)
    world = spec.launch.world_size
    tokens = train.total_batch_size or train.device_batch_size * train.seq_len * world
    base_lr = recorded.get("lr", {})
    peaks = ("matrix_lr", "embedding_lr", "unembedding_lr") + (
        ("scalar_lr",) if "scalar_lr" in base_lr else ()
    )
    return [
        Change("sequence length", str(train.seq_len), str(meta.sequence_len)),
        Change("tokens/step", f"{tokens:,}", _count(recorded.get("tokens"))),
        Change("steps", f"{train.steps:,}", _count(recorded.get("steps"))),
        Change(
            "peak LRs",
            ", ".join(f"{name.removesuffix('_lr')} {getattr(lr, name):g}" for name in peaks),
            ", ".join(f"{n.removesuffix('_lr')} {base_lr[n]:g}" for n in peaks if n in base_lr)
            or NOT_RECORDED,
        ),
        Change("LR warmup", f"{lr.warmup_steps} steps", recorded.get("warmup", NOT_RECORDED)),
        Change(
            "LR decay",
            _decay(lr.warmdown_frac, lr.final_lr_frac),
            _decay(recorded["warmdown"], recorded.get("final", 0.0))
            if "warmdown" in recorded
            else NOT_RECORDED,
        ),
        Change("optimizer state", optimizer_source(meta, base, spec.base.tag), ""),
    ]


def changed_summary(changes: list[Change]) -> str | None:
    """The changed settings on one line (what a launch says), or None when nothing recorded changed."""
    changed = [f"{c.setting} {c.base} -> {c.planned}" for c in changes if c.changed]
    return "changed vs the base run: " + "; ".join(changed) if changed else None


def optimizer_source(meta: CheckpointMeta, base: BaseLayout, tag: str) -> str:
    """Where the continued runs' optimizer state comes from, as the trainer will decide it (`core.train_start`)."""
    if meta.optimizer is not None and meta.optimizer.files:
        return "restored from the base's saved state"
    shards = optim_ranks(base.checkpoint_dir(tag), meta.step)
    if shards:
        return f"imported from nanochat's {len(shards)} per-rank shard(s)"
    return "fresh (none saved): peak LRs scaled down, longer warmup"


def _recorded(meta: CheckpointMeta) -> dict[str, Any]:
    """The base run's settings as its meta records them: nanochat's user_config, else rlab's run_config."""
    data = meta.model_dump(mode="json")
    out: dict[str, Any] = {"steps": meta.step}
    nano = data.get("user_config")
    if isinstance(nano, dict):
        out["tokens"] = nano.get("total_batch_size") or data.get("total_batch_size")
        out["lr"] = {
            k: v
            for k in ("matrix_lr", "embedding_lr", "unembedding_lr", "scalar_lr")
            if _num(v := nano.get(k))
        }
        if _num(nano.get("warmup_steps")):
            out["warmup"] = f"{nano['warmup_steps']} steps"
        elif _num(nano.get("warmup_ratio")):
            ratio = nano["warmup_ratio"]
            out["warmup"] = f"{ratio:.0%} of the steps" if ratio else "0 steps"
        if _num(nano.get("warmdown_ratio")):
            out["warmdown"] = nano["warmdown_ratio"]
            out["final"] = nano.get("final_lr_frac") or 0.0
        return out
    train = (data.get("run_config") or {}).get("train")
    if isinstance(train, dict):
        per_step = (
            (train.get("device_batch_size") or 0) * (train.get("seq_len") or 0) * (meta.world_size or 0)
        )
        out["tokens"] = train.get("total_batch_size") or per_step or None
        lr = train.get("lr")
        if isinstance(lr, dict):
            out["lr"] = {k: v for k, v in lr.items() if k.endswith("_lr") and _num(v)}
            if _num(lr.get("warmup_steps")):
                out["warmup"] = f"{lr['warmup_steps']} steps"
            if _num(lr.get("warmdown_frac")):
                out["warmdown"] = lr["warmdown_frac"]
                out["final"] = lr.get("final_lr_frac") or 0.0
    return out


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: Any) -> str:
    return f"{value:,}" if _num(value) else NOT_RECORDED


def _decay(warmdown: float, final: float) -> str:
    return f"linear over the last {warmdown:.0%} to {f'{final:g} x peak' if final else '0'}"
