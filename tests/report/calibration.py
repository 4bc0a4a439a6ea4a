"""Simulated null experiments through the report's own estimators: false-positive rate and interval coverage.

Each scenario draws an experiment in which the two compared arms have **no true difference** (exchangeable on
every unit, or equal in expectation with seed-to-seed training noise), runs the report's own comparison function
on it, and records whether the test rejected at 5% and whether the 95% interval covered the true difference (0).
Shapes follow the demo: 32 documents with several blocks each (BPB), 20 tasks x 11 examples (CORE), 24 keys
(passkey), 24 records (copy), and 3 or 5 training seeds with training noise that dominates, matches or is
dwarfed by the evaluation noise. Nulls that are not symmetric: per-unit differences drawn from a centred
exponential or lognormal (n = 20-64), heavy tails (t with 3 df), documents of very unequal length (the BPB
ratio), an arm with 5 seeds against a reference with one. Families: Holm over 10 and 60 correlated null tests
(centred exponential differences sharing a unit effect), and plasmode nulls: the committed demo's own
per-document BPB differences (each continued arm vs rope at each length), centred and resampled
(`rlab.report.stats.plasmode`, which `rlab report --calibrate` runs on the experiment at hand).

Print the table: ``.venv/bin/python -m tests.report.calibration [n_experiments]``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rlab.report.stats import inference as inf
from rlab.report.stats import plasmode
from rlab.report.stats import uncertainty as unc
from rlab.report.stats import verdicts as vd

DEMO_EVALS = Path(__file__).resolve().parents[2] / "results" / "demo" / "evals"

DRAWS = 1000
"""Sign-flip draws per simulated test (p resolves to 1e-3; the report uses 20000)."""


@dataclass(frozen=True)
class Result:
    scenario: str
    n_sims: int
    false_positive: float
    coverage: float
    untestable: float

    @property
    def mc_se(self) -> float:
        """Monte Carlo standard error of a 5% rate at this many experiments."""
        return math.sqrt(0.05 * 0.95 / self.n_sims)


def _bpb_arms(rng: np.random.Generator, seeds: int, seed_sd: float) -> tuple:
    """Per-block nats of two arms (S, n), bytes (n,), document of each block: 32 documents x 2-6 blocks."""
    docs = 32
    blocks = rng.integers(2, 7, size=docs)
    doc = np.repeat(np.arange(docs), blocks)
    nbytes = rng.integers(150, 400, size=len(doc)).astype(float)
    level = 1.8 * rng.lognormal(0.0, 0.15, size=docs)[doc]  # documents differ in difficulty
    out = []
    for _ in range(2):
        arm_doc = 0.02 * rng.standard_t(4, size=(seeds, docs))[:, doc]  # the arm's luck on each document
        train = seed_sd * rng.standard_normal((seeds, 1))  # each training seed shifts every document
        block = 0.01 * rng.standard_normal((seeds, len(doc)))
        out.append((level + arm_doc + train + block) * nbytes * math.log(2))
    return out[0], out[1], nbytes, doc


def bpb(seeds: int = 1, seed_sd: float = 0.0) -> Callable[[np.random.Generator], inf.Comparison]:
    def run(rng: np.random.Generator) -> inf.Comparison:
        a, b, nbytes, doc = _bpb_arms(rng, seeds, seed_sd)
        nb = np.tile(nbytes, (seeds, 1))
        return unc.bpb_paired_diff(a, nb, b, nb, key="sim", clusters=doc, draws=DRAWS).diff

    return run


def core(seeds: int = 1, seed_sd: float = 0.0) -> Callable[[np.random.Generator], inf.Comparison]:
    tasks, per_task = 20, 11
    base = {f"t{i}": (0.0, 0.25, 0.5)[i % 3] for i in range(tasks)}

    def run(rng: np.random.Generator) -> inf.Comparison:
        pairs = {}
        for t, b in base.items():
            p = np.clip(rng.beta(2, 2, size=per_task) * (1 - b) + b, 0, 1)  # each example's difficulty
            sides = []
            for _ in range(2):
                shift = seed_sd * rng.standard_normal((seeds, 1))
                sides.append((rng.random((seeds, per_task)) < np.clip(p + shift, 0, 1)).astype(float))
            pairs[t] = (sides[0], sides[1])
        return unc.core_paired_diff(pairs, base, key="sim", draws=DRAWS).diff

    return run


def passkey(keys: int = 24) -> Callable[[np.random.Generator], inf.Comparison]:
    def run(rng: np.random.Generator) -> inf.Comparison:
        p = rng.choice([0.05, 0.5, 0.95], size=keys)  # keys easy, hard, or a coin flip for the model
        a, b = ((rng.random(keys) < p).astype(float) for _ in range(2))
        return unc.passkey_paired_diff(a, b, np.arange(keys), key="sim", draws=DRAWS).diff

    return run


def copy(
    seeds: int = 1, seed_sd: float = 0.0, shift: float = 0.0
) -> Callable[[np.random.Generator], inf.Comparison]:
    """Per-record gains: skewed record effects shared by both arms, heavy-tailed arm x record noise."""
    records = 24

    def run(rng: np.random.Generator) -> inf.Comparison:
        record = rng.exponential(1.0, size=records)
        sides = []
        for delta in (shift, 0.0):
            noise = 0.3 * rng.standard_t(3, size=(seeds, records))
            sides.append(record + delta + noise + seed_sd * rng.standard_normal((seeds, 1)))
        return inf.compare(sides[0], sides[1], rng=rng, draws=DRAWS)

    return run


def skewed(draw: Callable[[np.random.Generator, int], np.ndarray], n: int):
    """One seed, n units whose differences are i.i.d. from `draw` (mean 0, not symmetric)."""

    def run(rng: np.random.Generator) -> inf.Comparison:
        d = draw(rng, n)
        return inf.compare(d, np.zeros(n), rng=rng, draws=DRAWS)

    return run


def exponential(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.exponential(1.0, n) - 1.0


def lognormal(rng: np.random.Generator, n: int, sigma: float = 0.75) -> np.ndarray:
    return rng.lognormal(0.0, sigma, n) - math.exp(sigma**2 / 2)


def heavy(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.standard_t(3, n)


def unequal_lengths(docs: int = 32) -> Callable[[np.random.Generator], inf.Comparison]:
    """BPB over documents of 1-10 scored blocks (10x unequal length, as long documents are scored) whose
    per-byte effect is skewed (centred exponential) and of mean 0."""

    def run(rng: np.random.Generator) -> inf.Comparison:
        nbytes = rng.integers(1, 11, docs) * rng.integers(250, 350, docs).astype(float)
        effect = 0.02 * (rng.exponential(1.0, docs) - 1.0)
        level = 1.8 * rng.lognormal(0.0, 0.15, docs)
        a = (level + effect) * nbytes * math.log(2)
        b = level * nbytes * math.log(2)
        return unc.bpb_paired_diff(a[None], nbytes[None], b[None], nbytes[None], key="sim", draws=DRAWS).diff

    return run


def unequal_seeds(seeds: int = 5) -> Callable[[np.random.Generator], inf.Comparison]:
    """An arm with `seeds` seeds against a reference with one, training noise dominant: the reference's seed
    term is borrowed from the arm that has one."""

    def run(rng: np.random.Generator) -> inf.Comparison:
        n = 40
        unit = rng.standard_normal(n)
        a = unit + 0.05 * rng.standard_normal((seeds, n)) + 0.3 * rng.standard_normal((seeds, 1))
        b = unit + 0.05 * rng.standard_normal((1, n)) + 0.3 * rng.standard_normal((1, 1))
        return inf.compare(a, b)

    return run


def seeded_skewed(seeds: int, ref_seeds: int, seed_sd: float, n: int = 32):
    """Seeds on both sides (or unequal counts) whose per-unit arm effect is skewed (centred exponential, SD 0.5
    against a unit SD of 1 shared by the arms), with training noise `seed_sd` per seed: the seeded test's skew
    correction with unit noise dominant (0) or seed noise dominant (0.3)."""

    def run(rng: np.random.Generator) -> inf.Comparison:
        unit = rng.standard_normal(n)
        effect = 0.5 * exponential(rng, n)
        a = unit + effect + 0.1 * rng.standard_normal((seeds, n)) + seed_sd * rng.standard_normal((seeds, 1))
        b = unit + 0.1 * rng.standard_normal((ref_seeds, n)) + seed_sd * rng.standard_normal((ref_seeds, 1))
        return inf.compare(a, b, rng=rng, draws=DRAWS)

    return run


UNEQUAL = "BPB, 32 documents of 1-10 blocks (unequal length), skewed effects"
SCENARIOS: dict[str, Callable[[np.random.Generator], inf.Comparison]] = {
    "BPB, 32 documents (clustered), 1 seed": bpb(),
    "CORE, 20 tasks x 11 examples (stratified), 1 seed": core(),
    "passkey, 24 keys, 1 seed": passkey(),
    "copy, 24 records, 1 seed": copy(),
    "skewed: centred exponential, n = 20": skewed(exponential, 20),
    "skewed: centred exponential, n = 64": skewed(exponential, 64),
    "skewed: centred lognormal (sigma 0.75), n = 32": skewed(lognormal, 32),
    "heavy-tailed: t with 3 df, n = 24": skewed(heavy, 24),
    UNEQUAL: unequal_lengths(),
    "BPB, 3 seeds, training noise dominant": bpb(3, 0.03),
    "BPB, 3 seeds, training noise ~ eval noise": bpb(3, 0.005),
    "BPB, 3 seeds, no training noise": bpb(3, 0.0),
    "BPB, 5 seeds, training noise dominant": bpb(5, 0.03),
    "CORE, 3 seeds, training noise dominant": core(3, 0.05),
    "CORE, 5 seeds, training noise dominant": core(5, 0.05),
    "copy, 3 seeds, training noise dominant": copy(3, 0.3),
    "copy, 5 seeds, training noise dominant": copy(5, 0.3),
    "5 seeds vs 1 seed, training noise dominant": unequal_seeds(5),
    "skewed units, 2 seeds, no training noise": seeded_skewed(2, 2, 0.0),
    "skewed units, 2 seeds, training noise dominant": seeded_skewed(2, 2, 0.3),
    "skewed units, 3 seeds, no training noise": seeded_skewed(3, 3, 0.0),
    "skewed units, 5 seeds, training noise ~ unit noise": seeded_skewed(5, 5, 0.03),
    "skewed units, 2 seeds vs 1, training noise dominant": seeded_skewed(2, 1, 0.3),
    "skewed units, 5 seeds vs 1, no training noise": seeded_skewed(5, 1, 0.0),
    "copy, 24 records, true shift 0.2 (coverage only)": copy(shift=0.2),
}
TRUE_VALUE = {"copy, 24 records, true shift 0.2 (coverage only)": 0.2}


def simulate(name: str, n_sims: int, seed: int = 0) -> Result:
    rng = np.random.default_rng([seed, len(name)] + [ord(c) for c in name])
    truth = TRUE_VALUE.get(name, 0.0)
    rejected = covered = untestable = 0
    for _ in range(n_sims):
        c = SCENARIOS[name](rng)
        if c.p_value is None:
            untestable += 1
        elif c.p_value <= inf.ALPHA:
            rejected += 1
        covered += c.low <= truth <= c.high
    fp = math.nan if truth != 0.0 else rejected / n_sims
    return Result(name, n_sims, fp, covered / n_sims, untestable / n_sims)


def correlated_family(m: int, n: int = 32, rho: float = 0.5, seed: int = 0) -> list[inf.UnitContributions]:
    """m null tests on the same n units whose centred-exponential differences share a unit effect (correlation
    `rho` between tests), as `plasmode.family_error` takes them (each resampled independently there, so the
    correlation enters through the shared shape only)."""
    rng = np.random.default_rng([seed, m, n])
    shared = exponential(rng, n)
    out = []
    for _ in range(m):
        z = math.sqrt(rho) * shared + math.sqrt(1 - rho) * exponential(rng, n)
        out.append(inf.UnitContributions(0.0, n, z - z.mean(), None))
    return out


def familywise(n_sims: int, m: int = 10, n: int = 32, rho: float = 0.5, seed: int = 0) -> float:
    """Share of simulated experiments in which Holm over m correlated null tests calls at least one significant:
    each experiment draws fresh centred-exponential differences with a shared unit effect."""
    rng = np.random.default_rng([seed, m, n, 1])
    hits = 0
    for _ in range(n_sims):
        shared = exponential(rng, n)
        comps = [
            inf.compare(
                math.sqrt(rho) * shared + math.sqrt(1 - rho) * exponential(rng, n),
                np.zeros(n),
                rng=rng,
                draws=20_000,
                stop_hits=plasmode.STOP_HITS,
            )
            for _ in range(m)
        ]
        _, _, verdicts = vd.decide_family("sim", comps, [False] * m)
        hits += any(v.significant for v in verdicts)
    return hits / n_sims


def demo_units(length: int | None = None) -> list[inf.UnitContributions]:
    """The committed demo's per-document BPB differences, each continued arm vs rope at each length (or one),
    as the report's one-seed test sees them: contributions (d - D w) / mean(w) of the document sums.

    Seed i of an arm is paired with seed i of rope (as the report pairs them); a comparison whose differences
    equal one already taken is left out: the demo's training seeds give byte-identical evals (the seed changes
    nothing in its continued training), and counting such a copy twice makes a family of duplicates."""
    frames = {
        p.parent.name: pd.read_csv(p)
        for p in sorted(DEMO_EVALS.glob("demo-*/bpb_units.csv"))
        if "zeroshot" not in p.parent.name
    }
    out: list[inf.UnitContributions] = []
    for name, frame in frames.items():
        seed = name[name.rindex("-seed") :] if "-seed" in name else ""
        ref = frames.get(f"demo-rope{seed}")
        if ref is None or name.startswith("demo-rope"):
            continue
        for metric in sorted(set(frame["metric"]) & set(ref["metric"])):
            if not str(metric).startswith("len_") or (length is not None and metric != f"len_{length}"):
                continue

            def docs(f: pd.DataFrame, metric: str = str(metric)) -> pd.DataFrame:
                return f[f["metric"] == metric].groupby("doc")[["nats", "bytes"]].sum()

            joined = docs(frame).merge(docs(ref), left_index=True, right_index=True, suffixes=("", "_ref"))
            d = (joined["nats"] - joined["nats_ref"]).to_numpy() / math.log(2)
            w = joined["bytes"].to_numpy(float)
            z = (d - d.sum() / w.sum() * w) / w.mean()
            if not any(len(u.z) == len(z) and np.allclose(u.z, z) for u in out):
                out.append(inf.UnitContributions(0.0, len(z), z, None))
    return out


def table(n_sims: int = 2000) -> str:
    lines = [
        "| null | experiments | false positives (nominal 5%) | 95% interval coverage | untestable |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in SCENARIOS:
        r = simulate(name, n_sims)
        fp = "" if math.isnan(r.false_positive) else f"{r.false_positive:.1%}"
        lines.append(f"| {name} | {r.n_sims} | {fp} | {r.coverage:.1%} | {r.untestable:.1%} |")
    fw_n = max(200, n_sims // 4)
    for m in (10, 60):
        lines.append(
            f"| Holm family of {m} correlated null tests (centred exponential, n = 32, rho 0.5) | {fw_n} | "
            f"{familywise(fw_n, m):.1%} (familywise) | | |"
        )
    for name, units in (("demo plasmode, BPB by length", demo_units()),):
        e = plasmode.family_error(name, units, reps=fw_n)
        lines.append(
            f"| {name}: Holm family of {e.size} | {e.reps} | {e.familywise:.1%} (familywise), {e.per_test:.1%} "
            f"(per test) | {e.coverage:.1%} | |"
        )
    lines.append(
        f"\nMonte Carlo SE of a 5% rate: {math.sqrt(0.05 * 0.95 / n_sims):.2%} at {n_sims} experiments, "
        f"{math.sqrt(0.05 * 0.95 / fw_n):.2%} at {fw_n}."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
