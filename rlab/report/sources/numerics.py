"""Were the compared numbers computed under the same numerics: dtype, CPU, ISA, torch build, threads?

Not a comparability mismatch (`comparability` blocks verdicts; this does not): the same code on the same data,
trained in another dtype or on another CPU, gives other digits, and after a few hundred steps a few percent
(the demo: 10 of 142 verdicts moved between "within noise" and a direction when an AMD CPU with avx512_bf16
trained in bf16 and an Intel one without it in fp32). That is training noise of the kind a seed is, which a
seed of one setting does not sample, so the report says when its arms differ in dtype and `rlab compare` when
two experiments differ in any of these (`docs/reproducibility.md`). Facts a file does not record (eval.json
written before rlab recorded the platform, nanochat's own checkpoints) are unknown, never a difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rlab.records.eval_doc import EvalDoc
from rlab.records.provenance import Platform
from rlab.report.sources.arms import Arm
from rlab.report.sources.tag_files import TagSources


def _platforms(doc: EvalDoc) -> list[Platform]:
    runs = [r.platform for r in doc.measured.values()]
    return [p for p in [doc.checkpoint.train_platform, *runs] if p is not None]


ASPECTS: dict[str, Callable[[EvalDoc], list[str | None]]] = {
    "training dtype": lambda d: [d.checkpoint.train_dtype],
    "eval dtype": lambda d: [r.dtype for r in d.measured.values()],
    "device": lambda d: [p.device for p in _platforms(d)],
    "CPU": lambda d: [p.cpu for p in _platforms(d)],
    "ISA": lambda d: [f"{p.kernels}: {' '.join(p.isa) or '-'}" for p in _platforms(d)],
    "torch": lambda d: [p.torch for p in _platforms(d)],
    "threads": lambda d: [str(p.threads) for p in _platforms(d)],
}
"""What each fact is, read from one tag's eval.json (training's from its checkpoint facts, eval's per section)."""

DTYPES = ("training dtype", "eval dtype")


@dataclass(frozen=True)
class NumericsDifference:
    """One fact on which groups (arms, or experiments) differ: each value with the groups that have it."""

    aspect: str
    values: tuple[tuple[str, tuple[str, ...]], ...]

    def detail(self) -> str:
        """`bfloat16 (base, pi (zero-shot)) vs float32 (pi, ntk)`."""
        return " vs ".join(f"{value} ({', '.join(names)})" for value, names in self.values)


def differences(
    groups: Mapping[str, Iterable[EvalDoc]], aspects: Iterable[str] = tuple(ASPECTS)
) -> list[NumericsDifference]:
    """The aspects on which `groups` (name -> the eval.json of its tags) differ; a group's value is every value
    its tags have, `+`-joined (a group whose tags disagree among themselves differs from one whose tags agree)."""
    docs = {name: list(ds) for name, ds in groups.items()}
    out = []
    for aspect in aspects:
        by_value: dict[str, list[str]] = {}
        for name, ds in docs.items():
            found = sorted({v for d in ds for v in ASPECTS[aspect](d) if v is not None})
            if found:
                by_value.setdefault(" + ".join(found), []).append(name)
        if len(by_value) > 1:
            out.append(NumericsDifference(aspect, tuple((v, tuple(n)) for v, n in by_value.items())))
    return out


def by_arm(arms: Iterable[Arm], tags: Iterable[TagSources]) -> dict[str, list[EvalDoc]]:
    """Arm key -> the eval.json of its evaluated tags."""
    docs = {t.tag: t.eval for t in tags if t.eval is not None}
    return {a.key: [docs[t] for t in a.tags if t in docs] for a in arms}


def by_experiment(tags: Iterable[TagSources]) -> dict[str, list[EvalDoc]]:
    """Experiment (`TagSources.group`) -> the eval.json of its evaluated tags, for `rlab compare`."""
    out: dict[str, list[EvalDoc]] = {}
    for t in tags:
        if t.eval is not None:
            out.setdefault(t.group, []).append(t.eval)
    return out


def experiments_note(tags: Iterable[TagSources]) -> str | None:
    """`rlab compare`'s line when the experiments were computed under other numerics; None when alike."""
    found = differences(by_experiment(tags))
    if not found:
        return None
    return (
        "The experiments were computed under other numerics ("
        + "; ".join(f"{d.aspect}: {d.detail()}" for d in found)
        + "): their differences include training noise of that kind, which seeds of one setting do not "
        "sample (docs/reproducibility.md)."
    )


def dtype_warning(groups: Mapping[str, Iterable[EvalDoc]]) -> str | None:
    """The report's line when its arms were trained or evaluated in different dtypes; None when they were not."""
    found = differences(groups, DTYPES)
    if not found:
        return None
    return (
        "Arms differ in "
        + "; ".join(f"{d.aspect}: {d.detail()}" for d in found)
        + ". Their differences include that change of numerics (training noise that seeds of one dtype do not "
        "sample): pin `train.dtype` and `pretrain.train.dtype` to compare them (docs/reproducibility.md)."
    )
