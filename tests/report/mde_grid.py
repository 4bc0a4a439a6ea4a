"""Power at the printed MDE through the report's own test, per distribution x n x level x direction.

The test's se, skewness a and sign-flip reference (so its critical value q) are unchanged when every unit shifts,
so one set of null samples gives the whole power curve: a true difference -mu is found exactly when
mu >= W_down = D₀ - se · G⁻¹(-q, a) (upwards: W_up = se · G⁻¹(q, a) - D₀), D₀ the null sample's estimate. Each
sample's q is its own reference's (`skew_test.SignFlips.reference`, `draws` sign patterns, as `inference.compare` takes it).
The printed MDE is the median over the samples of what the report prints on them (`inference.mde` with the
sample's se, skewness and units: "after"; the closed form at the sample's skewness: "before"); its power on each
side is the share of samples with W at most it.

``.venv/bin/python -m tests.report.mde_grid [samples] [draws] [workers]`` prints the table in docs/statistics.md
(2,000 samples and 20,000 draws a cell: Monte Carlo SE of a power near 80% about 0.9 points).
"""

from __future__ import annotations

import math
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from rlab.report.stats import inference as inf
from rlab.report.stats import mde as mde_rule
from rlab.report.stats import skew_test

KINDS = ("normal", "t3", "exponential", "lognormal")
SIZES = (20, 32, 64)
FAMILIES = (4, 60)
"""Family sizes m: the MDE is printed at alpha / m (Holm's strictest step)."""


def draw(kind: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Null unit differences (mean 0): normal, t with 3 df, centred exponential, centred lognormal (sigma 0.75)."""
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "t3":
        return rng.standard_t(3, shape)
    if kind == "exponential":
        return rng.exponential(1.0, shape) - 1.0
    return rng.lognormal(0.0, 0.75, shape) - math.exp(0.75**2 / 2)


@dataclass(frozen=True)
class Cell:
    kind: str
    n: int
    m: int
    power: dict[str, tuple[float, float]]
    """Rule ("before", "after") -> (power below 0, power above 0) at its median printed MDE."""


def null_samples(
    kind: str, n: int, samples: int, draws: int, seed: int = 0, families: tuple[int, ...] = FAMILIES
) -> np.ndarray:
    """(samples, 3 + len(families)): each null sample's estimate, se, a and reference critical value per level
    (`draws` must resolve alpha / m: at least 2 m / alpha)."""
    rng = np.random.default_rng([seed, n, KINDS.index(kind)])
    x = draw(kind, rng, (samples, n))
    mean, se, a = skew_test.moments(x, None)
    allowed = [math.floor(inf.ALPHA / m * (1 + draws) + 1e-9) - 1 for m in families]  # as `p_and_interval`
    q = []
    for row in x:
        ref = np.sort(skew_test.SignFlips(row - row.mean()).reference(rng, draws, inf.EXACT_SIGN_FLIP_MAX)[0])
        q.append([ref[::-1][i] for i in allowed])
    return np.column_stack([mean, se, a, np.array(q)])


def cells(kind: str, n: int, nulls: np.ndarray, families: tuple[int, ...] = FAMILIES) -> list[Cell]:
    """Power at the median printed MDE, before and after, at each level of `families` (as `null_samples`)."""
    mean, se, a = nulls[:, 0], nulls[:, 1], nulls[:, 2]
    out = []
    for j, m in enumerate(families):
        alpha, q = inf.ALPHA / m, nulls[:, 3 + j]
        w_down = mean - se * skew_test.hall_inverse(-q, a)
        w_up = se * skew_test.hall_inverse(q, a) - mean
        printed = {
            "before": [max(mde_rule.closed_form(s, n - 1.0, alpha, inf.POWER, g)) for s, g in zip(se, a)],
            "after": [inf.mde(s, n - 1.0, alpha, inf.POWER, g, n) for s, g in zip(se, a)],
        }
        power = {}
        for rule, values in printed.items():
            mde = float(np.median(values))
            power[rule] = (float(np.mean(w_down <= mde)), float(np.mean(w_up <= mde)))
        out.append(Cell(kind, n, m, power))
    return out


def _nulls(args: tuple[str, int, int, int, int]) -> np.ndarray:
    return null_samples(*args)


def table(samples: int = 2000, draws: int = 20_000, workers: int = 1, chunks: int = 4) -> str:
    """The markdown table; null samples drawn in `chunks` seeded pieces per cell over `workers` processes."""
    grid = [(k, n) for k in KINDS for n in SIZES]
    jobs = [(k, n, samples // chunks, draws, seed) for k, n in grid for seed in range(chunks)]
    with ProcessPoolExecutor(workers) as pool:
        drawn = list(pool.map(_nulls, jobs))
    rows = [
        "| units | n | level | before: below / above 0 | after: below / above 0 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for i, (kind, n) in enumerate(grid):
        for c in cells(kind, n, np.concatenate(drawn[i * chunks : (i + 1) * chunks])):
            b, a = c.power["before"], c.power["after"]
            rows.append(
                f"| {c.kind} | {c.n} | 0.05 / {c.m} | {100 * b[0]:.0f}% / {100 * b[1]:.0f}% | "
                f"{100 * a[0]:.0f}% / {100 * a[1]:.0f}% |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    argv = [int(v) for v in sys.argv[1:]]
    print(table(*argv))
