"""The power planner: how many units and seeds each endpoint needs to detect a stated difference.

A report's "within noise" says what it rules out through its MDE (`inference.Comparison.mde`); this module asks
the question before the experiment: given the noise of each endpoint, how many independent units (documents,
examples, keys, records) and training seeds make the smallest difference of interest detectable with 80% power
at the level the report will test it (its family's alpha / m, Holm's strictest step)?

The noise of a paired difference between two arms has the two terms `inference.compare` estimates:

* a **unit SD** σ_u: the SD of one unit's contribution to the difference (se² = σ_u² / n with one seed);
* a **seed SD** σ_s: the SD of one seed's difference between the arms (training noise; se² gains σ_s² / S
  with S seeds, and the test then has Satterthwaite's degrees of freedom over the two terms).

`inference.planned_se` turns (σ_u, n, σ_s, S) into the (se, df) the report's test would have, and
`inference.mde` into an MDE, so a plan and the report it leads to use one formula. The noise comes from a
**pilot** (`pilot.noise_from_report`: an experiment's per-unit files, through the report's own comparisons; each
endpoint takes the median of its comparisons, or the noisiest, `Spread`) or is **stated**
(`Noise` built by hand: `rlab power --unit-sd/--seed-sd`). A stated run-to-run SD of one arm (nanochat
publishes one for CORE) becomes the SD of a difference of two independent runs, √2 times it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rlab.report.stats import inference as inf
from rlab.spec.eval import TargetMde

if TYPE_CHECKING:
    from rlab.spec.eval import TargetMde

CLASSES = ("primary", "bpb", "core", "passkey", "copy_gain")
"""Endpoint classes a target MDE is stated for (`eval.target_mde`); a specific endpoint name overrides."""
SEED_GRID = (1, 2, 3, 5, 8, 10)
"""Seeds per arm a plan is worked out for."""
MAX_UNITS = 10**8
"""A plan needing more units than this is reported as unreachable."""
NANOCHAT_CORE_SEED_SD = 0.0052
"""Run-to-run SD of CORE: nanochat's dev/LEADERBOARD.md, "Run 4" (commit 4b40774, 2026-03-04), the same d24
command run 7 times (mildly non-deterministic training): CORE 0.25119 .. 0.26765, sample SD 0.0052."""
NANOCHAT_CORE_SOURCE = "nanochat dev/LEADERBOARD.md Run 4: 7 identical d24 runs, CORE SD 0.0052"


def _measures(endpoint: str) -> str:
    """What an endpoint measures: copy, core, passkey or bpb (its class and its units follow from it)."""
    if endpoint.startswith("copy"):
        return "copy"
    if endpoint == "core":
        return "core"
    if endpoint.startswith("passkey"):
        return "passkey"
    return "bpb"


def endpoint_class(endpoint: str, family: str) -> str:
    """The `CLASSES` entry whose target applies to an endpoint (by family first: the primary family)."""
    if family == "primary":
        return "primary"
    measures = _measures(endpoint)
    return "copy_gain" if measures == "copy" else measures


def class_family(cls: str) -> str:
    """The family an endpoint class's verdicts belong to."""
    return {"primary": "primary", "copy_gain": "copy"}.get(cls, "secondary")


def unit_word(endpoint: str, clustered: bool = True) -> str:
    """What the independent units of an endpoint are."""
    words = {"copy": "records", "core": "examples", "passkey": "keys"}
    return words.get(_measures(endpoint), "documents" if clustered else "blocks")


@dataclass(frozen=True)
class Noise:
    """The noise of one endpoint's paired differences, and the family its verdicts will belong to."""

    endpoint: str
    """``primary_bpb``, ``bpb_len_2048``, ``core``, ``passkey_overall``, ``copy_d472``, ..."""
    family: str
    """``primary``, ``secondary`` or ``copy``: the family the endpoint's verdicts are Holm-adjusted in."""
    family_size: int
    """Comparisons that family holds (m): the MDE is planned at alpha / m."""
    unit: str
    """documents, examples, keys or records."""
    unit_sd: float | None
    """SD of one unit's contribution to a difference; None when unknown."""
    seed_sd: float | None = None
    """SD of one seed's difference between two arms (training noise); None when unknown."""
    unit_skew: float = 0.0
    """Skewness of one unit's contribution: the report's MDE is the larger of its two directions
    (`rlab.report.stats.mde`), so a skewed endpoint plans with it (a = skewness / √n at n units)."""
    n_units: int | None = None
    """Units in the pilot (or the planned experiment) this noise was measured on / is checked for."""
    n_seeds: int = 1
    """Seeds per arm in the pilot (or the planned experiment)."""
    source: str = ""
    """Where `unit_sd` comes from (a pilot, a stated value, a default)."""
    set_by: str = ""
    """Which of the pilot's comparisons the SDs summarise (`Spread`)."""
    seed_source: str = ""
    """Where `seed_sd` comes from ('' when unknown)."""
    ref_value: float | None = None
    """The reference arm's value on this endpoint (for BPB: MDEs in percent), when known."""


@dataclass(frozen=True)
class SeedOption:
    """Units needed at one number of seeds per arm."""

    seeds: int
    units: int | None
    """Fewest units (at least `inference.MIN_UNITS`) that reach the target; None: unreachable at these seeds."""
    floor: float
    """The MDE with infinitely many units at these seeds (the seed term alone); 0 with one seed."""


@dataclass(frozen=True)
class EndpointPlan:
    noise: Noise
    target: float
    alpha: float
    """The level the MDE is planned at: the family's alpha / m."""
    power: float
    mde_now: float
    """MDE at the pilot's (or planned) units and seeds (NaN when the noise is unknown)."""
    options: list[SeedOption] = field(default_factory=list)

    @property
    def one_seed(self) -> SeedOption | None:
        return next((o for o in self.options if o.seeds == 1), None)

    @property
    def with_seeds(self) -> SeedOption | None:
        """The fewest seeds (>= 2, so training noise is covered) at which some number of units reaches the
        target; None when the seed SD is unknown or no seed count in the grid suffices."""
        if self.noise.seed_sd is None:
            return None
        return next((o for o in self.options if o.seeds >= inf.MIN_SEEDS and o.units is not None), None)

    @property
    def underpowered(self) -> bool:
        return not math.isnan(self.mde_now) and self.mde_now > self.target

    def as_dict(self) -> dict[str, Any]:
        n = self.noise
        return {
            "endpoint": n.endpoint,
            "family": n.family,
            "family_size": n.family_size,
            "alpha": self.alpha,
            "power": self.power,
            "unit": n.unit,
            "target_mde": self.target,
            "unit_sd": n.unit_sd,
            "seed_sd": n.seed_sd,
            "n_units": n.n_units,
            "n_seeds": n.n_seeds,
            "mde_now": None if math.isnan(self.mde_now) else self.mde_now,
            "underpowered": self.underpowered,
            "units_one_seed": self.one_seed.units if self.one_seed else None,
            "seeds_needed": self.with_seeds.seeds if self.with_seeds else None,
            "units_at_seeds_needed": self.with_seeds.units if self.with_seeds else None,
            "by_seeds": [{"seeds": o.seeds, "units": o.units, "mde_floor": o.floor} for o in self.options],
            "source": n.source,
            "set_by": n.set_by,
            "seed_source": n.seed_source,
            "ref_value": n.ref_value,
        }


# ---------------------------------------------------------------- the arithmetic


@dataclass(frozen=True)
class UnitNoise:
    """What an endpoint's MDE at a planned size depends on besides its units and seeds."""

    unit_sd: float
    seed_sd: float | None = None
    unit_skew: float = 0.0

    def mde(self, n_units: int, alpha: float, power: float = inf.POWER, n_seeds: int = 1) -> float:
        """The MDE the report would print for a comparison with this noise at `n_units` units and `n_seeds`
        seeds, tested at `alpha` (its skewness `a`: the units' third cumulant over the whole se³, as
        `inference.compare` takes it; simulated over the units when there is no seed term, as the report's)."""
        se, df = inf.planned_se(self.unit_sd, n_units, self.seed_sd, n_seeds)
        u = self.unit_sd / math.sqrt(n_units)
        skew = self.unit_skew / math.sqrt(n_units) * (u / se) ** 3 if se > 0 else 0.0
        seeded = n_seeds >= inf.MIN_SEEDS
        return inf.mde(se, df, alpha, power, skew, None if seeded else n_units)

    def floor(self, n_seeds: int, alpha: float, power: float = inf.POWER) -> float:
        """The MDE with unlimited units at `n_seeds` seeds: what the seed term alone allows (0 with one seed)."""
        if n_seeds < inf.MIN_SEEDS:
            return 0.0
        return inf.seed_floor((self.seed_sd or 0.0) ** 2 / n_seeds, n_seeds - 1.0, alpha, power)

    def required_units(
        self, target: float, alpha: float, power: float = inf.POWER, n_seeds: int = 1
    ) -> int | None:
        """The fewest units (never below `inference.MIN_UNITS`, the verdict gate) whose MDE is at most
        `target`; None when the seed term alone exceeds it or more than `MAX_UNITS` would be needed."""
        if not target > 0:
            return None

        def reaches(n: int) -> bool:
            return self.mde(n, alpha, power, n_seeds) <= target

        if self.unit_sd <= 0:
            return inf.MIN_UNITS if self.floor(n_seeds, alpha, power) <= target else None
        low = inf.MIN_UNITS
        if reaches(low):
            return low
        high = 2 * low
        while not reaches(high):  # the MDE falls with n (df grows, se shrinks) to the seed floor
            if high > MAX_UNITS:
                return None
            high *= 2
        while high - low > 1:  # reaches(high), not reaches(low)
            mid = (low + high) // 2
            low, high = (low, mid) if reaches(mid) else (mid, high)
        return high


def plan_endpoint(
    noise: Noise,
    target: float,
    alpha: float = inf.ALPHA,
    power: float = inf.POWER,
    seeds: tuple[int, ...] = SEED_GRID,
) -> EndpointPlan:
    """Units needed at each seed count of `seeds`, and the MDE at the noise's own units and seeds."""
    level = alpha / max(1, noise.family_size)
    if noise.unit_sd is None:
        return EndpointPlan(noise, target, level, power, math.nan, [])
    terms = UnitNoise(noise.unit_sd, noise.seed_sd, noise.unit_skew)
    now = (
        terms.mde(noise.n_units, level, power, noise.n_seeds)
        if noise.n_units and (noise.n_seeds < inf.MIN_SEEDS or noise.seed_sd is not None)
        else math.nan
    )
    options = []
    for s in seeds:
        if s >= inf.MIN_SEEDS and noise.seed_sd is None:
            continue
        options.append(
            SeedOption(s, terms.required_units(target, level, power, s), terms.floor(s, level, power))
        )
    return EndpointPlan(noise, target, level, power, now, options)


def target_for(noise: Noise, targets: TargetMde, overrides: dict[str, float] | None = None) -> float:
    """The target MDE of an endpoint: an override by its name, by its class, else the spec's (or default)."""
    overrides = overrides or {}
    if noise.endpoint in overrides:
        return overrides[noise.endpoint]
    cls = endpoint_class(noise.endpoint, noise.family)
    return overrides.get(cls, float(getattr(targets, cls)))


def plan(
    noises: list[Noise],
    targets: TargetMde,
    overrides: dict[str, float] | None = None,
    *,
    alpha: float = inf.ALPHA,
    power: float = inf.POWER,
    seeds: tuple[int, ...] = SEED_GRID,
) -> list[EndpointPlan]:
    return [plan_endpoint(n, target_for(n, targets, overrides), alpha, power, seeds) for n in noises]


def with_stated(
    noises: list[Noise],
    unit_sd: dict[str, float] | None = None,
    seed_sd: dict[str, float] | None = None,
) -> list[Noise]:
    """Replace a pilot's noise by stated values, by endpoint name or class (`CLASSES`).

    `seed_sd` is the run-to-run SD of one arm's value (as nanochat publishes CORE's): a difference of two
    independently trained arms has √2 times it."""
    unit_sd, seed_sd = unit_sd or {}, seed_sd or {}
    out = []
    for n in noises:
        cls = endpoint_class(n.endpoint, n.family)
        u = unit_sd.get(n.endpoint, unit_sd.get(cls))
        s = seed_sd.get(n.endpoint, seed_sd.get(cls))
        if u is not None:
            n = replace(n, unit_sd=u, source="stated (--unit-sd)", set_by="")
        if s is not None:
            n = replace(
                n,
                seed_sd=math.sqrt(2.0) * s,
                seed_source=f"stated run-to-run SD {s:g} (x√2 for a difference)",
            )
        out.append(n)
    return out
