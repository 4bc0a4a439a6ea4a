"""Arms of an experiment: what the report compares, each arm one or more tags (its training seeds).

An arm is a variant in one condition:

* ``continued``: the base with the variant's RoPE, then continued pretraining (the usual tag);
* ``zero-shot``: the base with the variant's RoPE applied and nothing trained (``train.steps: 0``);
* ``base``: the base checkpoint itself, evaluated as a reference point.

When several experiments are compared, arm keys and variants carry the experiment: ``A/yarn``.

Tags of the same variant and condition are seed replicates of one arm (same token budget, same data
start, different data order); the report averages over them and its intervals include their spread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rlab.report.tag_files import TagSources

ArmKind = Literal["continued", "zero-shot", "base"]
KIND_ORDER: tuple[str, ...] = ("continued", "zero-shot", "base")


@dataclass
class Arm:
    key: str
    """Unique label: the variant (continued), ``<variant> (zero-shot)``, or ``base``."""
    variant: str
    kind: ArmKind
    tags: list[str] = field(default_factory=list)
    seeds: list[int | None] = field(default_factory=list)
    group: str = ""
    """The experiment it comes from when several are compared (`rlab.report.compare`); '' for one experiment."""
    """Training seed of each tag (None when unknown), in the order of `tags`."""

    @property
    def n_seeds(self) -> int:
        return len(self.tags)


def _train_section(src: TagSources) -> dict[str, Any]:
    train = (src.run_config or {}).get("train")
    return train if isinstance(train, dict) else {}


def kind_of(src: TagSources) -> ArmKind:
    """The arm condition of a tag: from its variant name and its run config's step count."""
    if src.variant == "base":
        return "base"
    steps = _train_section(src).get("steps")
    if steps == 0:
        return "zero-shot"
    return "continued"


def seed_of(src: TagSources) -> int | None:
    seed = _train_section(src).get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def arm_key(variant: str, kind: ArmKind) -> str:
    return {"continued": variant, "zero-shot": f"{variant} (zero-shot)", "base": "base"}[kind]


def qualify(group: str, name: str) -> str:
    """`<experiment>/<name>` when arms of several experiments are compared, else `name` unchanged."""
    return f"{group}/{name}" if group else name


def group_arms(tags: list[TagSources]) -> list[Arm]:
    """Tags grouped into arms (in first-seen order), each arm's tags ordered by seed then tag."""
    arms: dict[str, Arm] = {}
    for src in tags:
        kind = kind_of(src)
        key = qualify(src.group, arm_key(src.variant, kind))
        arm = arms.setdefault(
            key, Arm(key=key, variant=qualify(src.group, src.variant), kind=kind, group=src.group)
        )
        arm.tags.append(src.tag)
        arm.seeds.append(seed_of(src))
    for arm in arms.values():
        order = sorted(
            range(len(arm.tags)), key=lambda i: (arm.seeds[i] is None, arm.seeds[i] or 0, arm.tags[i])
        )
        arm.tags = [arm.tags[i] for i in order]
        arm.seeds = [arm.seeds[i] for i in order]
    return list(arms.values())


def reference_arm(arm: Arm, arms: list[Arm], base: Arm) -> Arm:
    """What `arm` is compared with: a zero-shot arm with the baseline variant's zero-shot arm (else the base
    model), so that its difference is the RoPE change alone, not training; every other arm with `base`."""
    if arm.kind == "zero-shot":
        for kind in ("zero-shot", "base"):
            hit = next(
                (a for a in arms if a.kind == kind and (kind == "base" or a.variant == base.variant)), None
            )
            if hit is not None:
                return hit
    return base


def baseline_arm(arms: list[Arm], baseline: str) -> Arm | None:
    """The arm every other is compared with: the baseline variant continued, else in any condition."""
    for kind in KIND_ORDER:
        for arm in arms:
            if arm.variant == baseline and arm.kind == kind:
                return arm
    return None
