"""Arms of an experiment: what the report compares, each arm one or more tags (its training seeds).

An arm is a variant in one condition:

* ``continued``: the base with the variant's RoPE, then continued pretraining (the usual tag);
* ``zero-shot``: the base with the variant's RoPE applied and nothing trained (``train.steps: 0``);
* ``base``: the base checkpoint itself, evaluated as a reference point.

When several experiments are compared, arm keys and variants carry the experiment: ``A/yarn``.

Tags of the same variant and condition are seed replicates of one arm (same token budget, same data
start, different data order); the report averages over them and its intervals include their spread.
With replicated bases (``train.replicate_base``) seed i of every arm continues base replicate i, so the
per-seed differences pair arms on the same base and the seed spans pretraining noise too (`seed_bases`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rlab.report.sources.tag_files import TagSources

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
    """The experiment it comes from when several are compared (`rlab.report.assemble.compare`); '' for one experiment."""
    """Training seed of each tag (None when unknown), in the order of `tags`."""

    @property
    def n_seeds(self) -> int:
        return len(self.tags)


def kind_of(src: TagSources) -> ArmKind:
    """The arm condition of a tag: from its variant name and its run config's step count."""
    if src.variant == "base":
        return "base"
    if src.run_config is not None and src.run_config.train.steps == 0:
        return "zero-shot"
    return "continued"


def seed_of(src: TagSources) -> int | None:
    """The training seed of a tag (its run.json); None for a tag with no run config."""
    return src.run_config.train.seed if src.run_config is not None else None


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


def base_of(src: TagSources) -> str | None:
    """The base tag a tag starts from (its run config's lineage); a base arm's tag is its own base."""
    if kind_of(src) == "base":
        return src.tag
    lineage = src.run_config.lineage if src.run_config is not None else None
    return lineage.parent_tag if lineage is not None else None


def seed_bases(arms: list[Arm], tags: list[TagSources]) -> dict[str, list[str | None]]:
    """Per arm of several seeds whose seeds start from different bases (replicated bases), the base of each
    seed in the arm's order; empty when every seed of every arm continues one base."""
    by_tag = {src.tag: src for src in tags}
    out = {}
    for arm in arms:
        bases = [base_of(by_tag[t]) if t in by_tag else None for t in arm.tags]
        if len(set(bases)) > 1:
            out[arm.key] = bases
    return out


def unpaired_bases(bases: dict[str, list[str | None]]) -> list[str]:
    """Arms whose seed i does not continue the same base as the other arms' seed i (so a per-seed difference
    would mix base noise into the pairing); empty when replicated bases pair every seed."""
    if not bases:
        return []
    first = next(iter(bases.values()))
    return [key for key, row in bases.items() if row[: len(first)] != first[: len(row)]]
