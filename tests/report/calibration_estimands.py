"""Simulated experiments through the estimands' own code (`rlab.report.estimands`): false positives and coverage.

* **retention** (BPB at L0, by document): the arm equals its base in expectation (null: ratio 100%), with
  documents of lognormal size and per-document differences that are skewed (centred exponential) or
  heavy-tailed (t with 3 df); false positive = the report's paired test of "keeps 100%" rejects at 5%; coverage =
  the 95% interval holds 100%. A shifted arm (BPB 3% worse, skewed noise) checks coverage of a ratio != 1.
* **retention (CORE)**: 0/1 outcomes of 20 tasks x 11 examples, the arm as good as the base.
* **key-token BPB**: arm A equals the base on the scored targets, arm B is an equal arm with its own noise; the
  cross-fitted selection keeps the paired test at 5%; choosing targets by their own base loss (printed as an
  illustration, not used) makes A look better.
* **effective length**: per-length accuracies on a grid, keys per length 24 or 80, true curves that cross the
  threshold away from the grid's ends; coverage = the bootstrap interval holds the true effective length; false
  positive = the interval lies wholly above it (the claim "retrieves longer" made wrongly). On the demo's passkey
  lengths (256, 512, 1024) too, with accuracy 1.0 (every key right: the bootstrap cannot move that length) or 0.0
  at some lengths, and a true accuracy just under the threshold where 20 keys are often all right.

Print the table: ``.venv/bin/python -m tests.report.calibration_estimands [n_experiments]``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import numpy as np

from rlab.report.estimands import effective_length as el
from rlab.report.estimands import key_tokens as kt
from rlab.report.estimands.ratio import paired_ratio
from rlab.report.stats import uncertainty as unc
from rlab.report.stats.uncertainty import _core_values
from tests.report.calibration import Result

DRAWS = 1000
"""Sign-flip draws per simulated test (p resolves to 1e-3)."""
Outcome = tuple[bool | None, bool]
"""(rejected, or None where untestable; the interval covered the truth)."""


def _docs(rng: np.random.Generator, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Per-document bytes and base nats (documents differ in difficulty). BPB at L0 scores the same number of
    targets in every document, so sizes vary only with bytes per token (lognormal, sd 0.3)."""
    nbytes = np.round(500 * rng.lognormal(0.0, 0.3, size=n))
    base = nbytes * math.log(2) * 1.9 * rng.lognormal(0.0, 0.15, size=n)
    return nbytes, base


def retention_bpb(noise: str, effect: float = 1.0) -> Callable[[np.random.Generator], Outcome]:
    """Arm nats = effect x base nats + a zero-mean per-document difference of the given shape."""

    def run(rng: np.random.Generator) -> Outcome:
        _, base = _docs(rng)
        scale = 0.03 * base
        if noise == "skewed":
            e = scale * (rng.exponential(1.0, size=len(base)) - 1.0)
        elif noise == "heavy":
            e = scale * rng.standard_t(3, size=len(base)) / math.sqrt(3.0)
        else:
            e = scale * rng.standard_normal(len(base))
        arm = effect * base + e
        r = paired_ratio(base, arm, key="sim", draws=DRAWS, seed=int(rng.integers(1 << 30)))
        assert r is not None
        rejected = None if r.p_value is None else r.p_value <= 0.05
        return (rejected if effect == 1.0 else None), bool(r.low <= 1.0 / effect <= r.high)

    return run


def retention_core() -> Callable[[np.random.Generator], Outcome]:
    tasks, per_task = 20, 11
    chance = {f"t{i}": (0.0, 0.25, 0.5)[i % 3] for i in range(tasks)}

    def run(rng: np.random.Generator) -> Outcome:
        sides: list[dict[str, np.ndarray]] = [{}, {}]
        for t, b in chance.items():
            p = np.clip(b + (1 - b) * rng.beta(3, 2, size=per_task), 0, 1)
            for side in sides:
                side[t] = (rng.random((1, per_task)) < p).astype(float)
        arm, strata = _core_values(sides[0], chance)
        base, _ = _core_values(sides[1], chance)
        r = paired_ratio(arm, base, strata=strata, key="sim", draws=DRAWS, seed=int(rng.integers(1 << 30)))
        assert r is not None
        return (None if r.p_value is None else r.p_value <= 0.05), bool(r.low <= 1.0 <= r.high)

    return run


LENGTHS = [256, 512, 1024, 2048, 4096]


DEMO_LENGTHS = [256, 512, 1024]
"""The demo's passkey lengths (experiments/demo.yaml), L0 = 256."""


def effective(
    threshold: str, keys: int, curve: tuple[float, ...], lengths: list[int] = LENGTHS
) -> Callable[[np.random.Generator], Outcome]:
    """Per-length keys drawn with the true accuracies `curve`; L0 = the first length."""
    p = np.asarray(curve)
    level = el.ABSOLUTE if threshold == "absolute" else el.RELATIVE * p[0]
    truth = [0, *lengths][int(el.longest_passing(p, level))]

    def run(rng: np.random.Generator) -> Outcome:
        items = {L: (rng.random(keys) < q).astype(float) for L, q in zip(lengths, p, strict=True)}
        got = el.estimate(items, lengths[0], threshold, rng, draws=400)
        low, high = int(got["low"]), int(got["high"])  # type: ignore[call-overload]
        return low > truth, low <= truth <= high

    return run


def key_token(selection: str) -> Callable[[np.random.Generator], Outcome]:
    """Arm A *is* the base at the long length (as a zero-shot arm within L0 is), arm B an equal arm with its own
    noise; 40 documents x 128 targets in 5 repeat cells, cell 3 gaining 1 nat with context. Selection `cross`
    is the report's (cells chosen on the other half); `in-sample` picks the targets whose own base drop is in
    the top 20% (LongPPL applied to the very losses it then scores), which favours A."""
    docs, per_doc = 40, 128

    def run(rng: np.random.Generator) -> Outcome:
        doc = np.repeat(np.arange(docs), per_doc)
        cells = rng.choice(5, p=[0.5, 0.2, 0.1, 0.15, 0.05], size=len(doc))
        level = 3.0 + 0.5 * rng.standard_normal(docs)[doc] + 0.3 * rng.standard_normal(len(doc))
        short = level + (cells == 3) * 1.0 + 0.1 + 0.8 * rng.standard_normal(len(doc))
        long_a = level + 0.8 * rng.standard_normal(len(doc))
        long_b = level + 0.8 * rng.standard_normal(len(doc))
        drop = short - long_a
        if selection == "cross":
            mask = kt.key_mask(drop, cells, kt.fold_of(doc))
        else:
            mask = drop >= np.quantile(drop, 0.8)
        nbytes = np.full(len(doc), 4.0)
        sums = [np.bincount(doc[mask], weights=x[mask], minlength=docs) for x in (long_a, long_b, nbytes)]
        keep = sums[2] > 0
        d = unc.bpb_paired_diff(
            sums[0][keep],
            sums[2][keep],
            sums[1][keep],
            sums[2][keep],
            key="sim",
            draws=DRAWS,
            seed=int(rng.integers(1 << 30)),
        )
        assert d is not None
        c = d.diff
        return (None if c.p_value is None else c.p_value <= 0.05), bool(c.low <= 0.0 <= c.high)

    return run


_DECLINE = (0.97, 0.95, 0.93, 0.7, 0.4)
_EARLY = (0.95, 0.75, 0.5, 0.3, 0.1)
_NEAR = (0.95, 0.92, 0.89, 0.82, 0.6)
"""Accuracy 0.89 at the true effective length, 0.82 just past it: both within 0.04 of the threshold."""
SCENARIOS: dict[str, Callable[[np.random.Generator], Outcome]] = {
    "retention BPB, normal": retention_bpb("normal"),
    "retention BPB, skewed": retention_bpb("skewed"),
    "retention BPB, heavy-tailed": retention_bpb("heavy"),
    "retention BPB 3% worse, skewed": retention_bpb("skewed", 1.03),
    "retention CORE": retention_core(),
    "key-token BPB, cross-fitted, arm = base": key_token("cross"),
    "effective length abs, 24 keys": effective("absolute", 24, _DECLINE),
    "effective length abs, 80 keys": effective("absolute", 80, _DECLINE),
    "effective length abs near, 24 keys": effective("absolute", 24, _NEAR),
    "effective length abs near, 80 keys": effective("absolute", 80, _NEAR),
    "effective length rel, 24 keys": effective("relative", 24, _EARLY),
    "effective length rel near, 80 keys": effective("relative", 80, (0.9, 0.85, 0.82, 0.78, 0.5)),
    "effective length rel, 80 keys": effective("relative", 80, _DECLINE),
    "effective length abs, demo-like, 48 keys": effective("absolute", 48, (1.0, 0.9, 0.5), DEMO_LENGTHS),
    "effective length rel, demo-like, 48 keys": effective("relative", 48, (1.0, 0.93, 0.6), DEMO_LENGTHS),
    "effective length abs, 1.0 then 0.0, 48 keys": effective("absolute", 48, (1.0, 1.0, 0.0), DEMO_LENGTHS),
    "effective length abs, 0.85 at L0, 20 keys": effective("absolute", 20, (0.85, 0.7, 0.3), DEMO_LENGTHS),
    "effective length rel, 1.0 then 0.88, 24 keys": effective("relative", 24, (1.0, 0.88, 0.3), DEMO_LENGTHS),
}

ILLUSTRATIONS: dict[str, Callable[[np.random.Generator], Outcome]] = {
    "key-token BPB, in-sample choice (not used)": key_token("in-sample"),
}
"""What the report does not do, and why: the same null with key targets chosen on their own losses."""


def simulate(name: str, n_sims: int, seed: int = 0) -> Result:
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    outcomes = [(SCENARIOS | ILLUSTRATIONS)[name](rng) for _ in range(n_sims)]
    tested = [r for r, _ in outcomes if r is not None]
    return Result(
        name,
        n_sims,
        float(np.mean(tested)) if tested else math.nan,
        float(np.mean([c for _, c in outcomes])),
        1.0 - len(tested) / n_sims,
    )


def table(n_sims: int = 1000) -> str:
    lines = [f"{'scenario':38s} {'false pos':>9s} {'coverage':>9s}  (n = {n_sims})"]
    for name in (*SCENARIOS, *ILLUSTRATIONS):
        r = simulate(name, n_sims)
        lines.append(f"{name:38s} {r.false_positive:9.3f} {r.coverage:9.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
