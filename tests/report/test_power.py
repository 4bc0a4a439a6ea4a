"""The power planner: closed forms, the exact noncentral-t power, agreement with the report's MDE, and simulated
experiments through `inference.compare` at the sizes it recommends."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rlab.paths import ExperimentLayout
from rlab.report.assemble.collect import collect
from rlab.report.power import pilot as pilot_noise
from rlab.report.power import planner as power
from rlab.report.power import spec as power_spec
from rlab.report.stats import inference as inf
from rlab.report.stats import mde as mde_rule
from rlab.report.stats import verdicts as vd
from rlab.spec.eval import TargetMde
from rlab.spec.loading import load_spec
from tests.conftest import REPO_ROOT

UNIT = power.UnitNoise(1.0)
"""Units of SD 1, one seed, symmetric."""


def exact_power(n: int, effect: float, sd: float, alpha: float) -> float:
    """Power of the two-sided one-sample (paired) t test: the noncentral t distribution."""
    df, nc = n - 1, effect * math.sqrt(n) / sd
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def test_textbook_case_and_the_normal_approximation():
    # Cohen's d = 0.5, alpha 0.05 two-sided, 80% power: a paired t test needs 34 pairs (power tables); the
    # report's test on normal units asks a few more (its MDE is simulated with the sample's spurious skewness)
    assert closed_form_units(0.5, 0.05) == 34
    assert 34 <= UNIT.required_units(0.5, 0.05) <= 40
    for alpha, effect in [(0.05, 0.1), (0.0125, 0.1), (0.001, 0.3), (0.05 / 64, 0.05)]:
        n = UNIT.required_units(effect, alpha)
        z = ((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(0.8)) / effect) ** 2
        assert n is not None and z <= n <= z * 1.08 + 5  # t quantiles sit a little above the normal's
        assert UNIT.mde(n, alpha) <= effect < UNIT.mde(n - 1, alpha)
        assert 0.79 <= exact_power(n, effect, 1.0, alpha) <= 0.88


def closed_form_units(effect: float, alpha: float) -> int:
    """The fewest units whose t-formula MDE is at most `effect` (unit SD 1)."""
    return next(n for n in range(2, 10**6) if mde_rule.closed_form(n**-0.5, n - 1.0, alpha, 0.8)[0] <= effect)


def test_never_below_the_verdict_gate_and_scales_with_the_noise():
    assert UNIT.required_units(5.0, 0.05) == inf.MIN_UNITS
    small = UNIT.required_units(0.1, 0.01)
    large = power.UnitNoise(2.0).required_units(0.1, 0.01)
    assert small is not None and large is not None and large / small == pytest.approx(4.0, rel=0.01)


def test_seeds_closed_form_and_the_floor_the_seed_term_sets():
    alpha, target, seeds = 0.0125, 1.0, 5
    noise = power.UnitNoise(1.0, seed_sd=0.2)
    k = stats.t.ppf(1 - alpha / 2, seeds - 1) + stats.t.ppf(0.8, seeds - 1)
    n = noise.required_units(target, alpha, n_seeds=seeds)
    assert n is not None and noise.mde(n, alpha, n_seeds=seeds) <= target
    assert n == 20 or noise.mde(n - 1, alpha, n_seeds=seeds) > target
    floor = noise.floor(seeds, alpha)
    assert floor == pytest.approx(k * 0.2 / math.sqrt(seeds))
    # with unlimited units the seed term alone is left (Satterthwaite's df fall to S - 1)
    assert noise.mde(10**7, alpha, n_seeds=seeds) == pytest.approx(floor, rel=1e-3)
    assert noise.floor(1, alpha) == 0.0


def test_the_plan_quotes_the_mde_the_report_would_print():
    """One formula: a comparison's own MDE equals the planner's at the same units, seeds and level."""
    rng = np.random.default_rng(0)
    for seeds in (1, 3):
        a = rng.normal(0.3, 1.0, size=(seeds, 40)) + rng.normal(0, 0.2, size=(seeds, 1))
        b = rng.normal(0.0, 1.0, size=(seeds, 40)) + rng.normal(0, 0.2, size=(seeds, 1))
        c = inf.compare(a, b, draws=200)
        unit_sd = math.sqrt(c.unit_var * c.n_units)
        seed_sd = math.sqrt(c.seed_var * c.n_seeds) if seeds > 1 else None
        gamma = c.skew * math.sqrt(c.n_units) * ((c.unit_var + c.seed_var) / c.unit_var) ** 1.5
        for alpha in (0.05, 0.05 / 7):
            planned = power.UnitNoise(unit_sd, seed_sd, gamma).mde(c.n_units, alpha, n_seeds=c.n_seeds)
            assert planned == pytest.approx(c.mde(alpha), rel=1e-12)


def _simulated_power(n: int, effect: float, unit_sd: float, alpha: float, sims: int, seed: int) -> float:
    """Share of simulated paired experiments (one seed) the report's test calls significant at `alpha`."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(sims):
        diff = rng.normal(effect, unit_sd, size=n)
        base = rng.normal(3.0, 1.0, size=n)  # the arms' levels: only their per-unit difference matters
        c = inf.compare(base + diff, base, rng=rng, draws=2000)
        hits += vd.decide(c, c.p_value, lower_is_better=False, alpha=alpha) is vd.Verdict.BETTER
    return hits / sims


def test_the_recommended_units_give_80_percent_power_in_simulation():
    """Through `inference.compare` (sign-flip test) at the family's alpha/m: about 80%, and clearly less at half."""
    noise = power.Noise("core", "secondary", 4, "examples", unit_sd=1.0)
    plan = power.plan_endpoint(noise, target=0.5)
    n = plan.one_seed.units
    assert n == UNIT.required_units(0.5, 0.05 / 4)
    sims = 400  # Monte Carlo SE of a rate near 0.8: 0.02
    assert 0.74 <= _simulated_power(n, 0.5, 1.0, plan.alpha, sims, seed=1) <= 0.87
    assert _simulated_power(n // 2, 0.5, 1.0, plan.alpha, sims, seed=2) < 0.62


def test_with_seeds_the_recommended_plan_gives_at_least_80_percent():
    """Seeds as the replicate: per-seed training offsets (SD seed_sd) on top of unit noise, t over S - 1 df."""
    unit_sd, seed_sd, effect, alpha, seeds = 1.0, 0.2, 1.0, 0.0125, 5
    n = power.UnitNoise(unit_sd, seed_sd).required_units(effect, alpha, n_seeds=seeds)
    rng = np.random.default_rng(3)
    hits, sims = 0, 600
    for _ in range(sims):
        diff = effect + rng.normal(0, seed_sd, size=(seeds, 1)) + rng.normal(0, unit_sd, size=(1, n))
        c = inf.compare(diff, np.zeros((seeds, n)))
        hits += vd.decide(c, c.p_value, lower_is_better=False, alpha=alpha) is vd.Verdict.BETTER
    # the seed term is estimated on S - 1 df while the unit term is nearly exact, so t(S - 1) makes the planned
    # power a lower bound; it must not fall short of 80%
    assert 0.76 <= hits / sims <= 0.97


def test_targets_by_class_and_overrides():
    noises = [
        power.Noise("primary_bpb", "primary", 4, "documents", 0.05),
        power.Noise("bpb_len_2048", "secondary", 50, "documents", 0.05),
        power.Noise("copy_gain_d472", "copy", 38, "records", 0.3),
        power.Noise("core", "secondary", 50, "examples", 0.5),
    ]
    targets = TargetMde(primary=0.02, bpb=0.03, copy_gain=0.2, core=0.05)
    got = [power.target_for(n, targets, {"bpb_len_2048": 0.004}) for n in noises]
    assert got == [0.02, 0.004, 0.2, 0.05]


def test_stated_run_to_run_sd_becomes_the_sd_of_a_difference():
    noise = power.Noise("core", "secondary", 8, "examples", None)
    (stated,) = power.with_stated([noise], {"core": 0.57}, {"core": power.NANOCHAT_CORE_SEED_SD})
    assert stated.unit_sd == 0.57 and stated.seed_sd == pytest.approx(math.sqrt(2) * 0.0052)
    plan = power.plan_endpoint(stated, target=0.02)
    assert plan.with_seeds is not None and plan.with_seeds.seeds >= 2
    chosen = plan.with_seeds
    assert power.UnitNoise(0.57, stated.seed_sd).mde(chosen.units, plan.alpha, n_seeds=chosen.seeds) <= 0.02
    fewer = [o for o in plan.options if 2 <= o.seeds < chosen.seeds]
    assert all(o.units is None for o in fewer)  # fewer seeds cannot reach it at any number of examples


# ---------------------------------------------------------------- from a pilot, from a spec, on the command line


def test_pilot_noise_reproduces_the_reports_mdes(fx):
    """The unit SD read from a pilot's comparisons gives back each comparison's printed MDE (one formula)."""

    data = collect(fx, draws=200)
    comps = data.comparisons[data.comparisons["mde"].notna()]
    assert len(comps) >= 10
    for r in comps.itertuples(index=False):
        unit_sd = math.sqrt(r.unit_var * r.n_units)
        gamma = pilot_noise.unit_skew(pd.DataFrame([r._asdict()]))
        planned = power.UnitNoise(unit_sd, unit_skew=gamma).mde(int(r.n_units), 0.05 / int(r.family_size))
        assert planned == pytest.approx(r.mde, rel=1e-9)
    noises = {(n.endpoint, n.family): n for n in pilot_noise.noise_from_report(data, "fx", spread="max")}
    primary = noises[(data.primary.metric, "primary")]  # fx: the extension BPB(2T) - BPB(T)
    rows = comps[(comps["metric"] == data.primary.metric) & (comps["family"] == "primary")]
    assert primary.family_size == len(rows) and primary.unit == "documents" and primary.n_units == 24
    assert primary.unit_sd == pytest.approx(
        max(math.sqrt(v * n) for v, n in zip(rows.unit_var, rows.n_units))
    )
    # CORE has 16 examples (too few units, in no family yet) but a variance: planned, and counted in its family
    core = noises[("core", "secondary")]
    assert core.unit_sd > 0 and core.n_units == 16
    assert core.family_size == int((data.comparisons["family"] == "secondary").sum()) + 2
    assert noises[("passkey_overall", "secondary")].unit_sd is None  # no units: nothing to plan from


def test_spec_check_planned_units_and_warnings(tmp_path):

    spec = load_spec("experiments/demo.yaml", base_dir=tmp_path / "base", results_dir=tmp_path / "results")
    spec = spec.model_copy(
        update={"train": spec.train.model_copy(update={"seeds": 1})}
    )  # no seed SD to plan from
    planned = power_spec.planned_units(spec, l0=256)
    assert planned["primary"].units == math.ceil(spec.eval.length_tokens / spec.eval.length_block)
    assert planned["copy_gain"].units == spec.eval.copy_trials
    assert planned["passkey"].units == 2 * 4 * spec.eval.passkey_trials
    assert planned["core"].units == power_spec.CORE_TASKS * spec.eval.max_per_task
    check = power_spec.check_experiment(spec, l0=256)  # no evals under tmp results: default noise
    assert check.pilot is None and "default noise (no pilot)" in check.line()
    primary = next(p for p in check.plans if p.noise.endpoint == "primary")
    assert primary.noise.family_size == len(spec.variants) - 1
    assert primary.mde_now == pytest.approx(
        power.UnitNoise(power_spec.DEFAULT_NOISE["primary"][0]).mde(planned["primary"].units, 0.05 / 4)
    )
    tight = spec.model_copy(
        update={"eval": spec.eval.model_copy(update={"target_mde": TargetMde(primary=0.001)})}
    )
    warned = " ".join(power_spec.check_experiment(tight, l0=256).warnings())
    assert "underpowered for eval.target_mde.primary" in warned and "eval.length_tokens" in warned
    core = next(p for p in check.plans if p.noise.endpoint == "core")
    assert core.noise.seed_source == power.NANOCHAT_CORE_SOURCE  # a published seed SD where there is one
    roomy = spec.model_copy(
        update={"eval": spec.eval.model_copy(update={"target_mde": TargetMde(primary=1.0)})}
    )
    assert not next(
        p for p in power_spec.check_experiment(roomy, 256).plans if p.noise.endpoint == "primary"
    ).underpowered


def test_the_copy_family_estimate_counts_retention_past_l0(tmp_path):
    """The demo's copy family holds 5 levels and 3 retentions (windows 512-1024 past L0 = 256) per arm: the
    estimate must not be below what the report will adjust over, or the planned MDEs would be optimistic."""

    spec = load_spec("experiments/demo.yaml", base_dir=tmp_path / "base", results_dir=tmp_path / "results")
    planned = power_spec.planned_units(spec, l0=256)
    arms = 2 * (len(spec.variants) - 1)
    assert power_spec.family_sizes(spec, planned, 256)["copy"] == arms * (5 + 3)
    assert power_spec.family_sizes(spec, planned)["copy"] == arms * 5  # L0 unknown: levels only


def test_the_dry_run_counts_the_families_the_demo_report_adjusts_over(tmp_path):
    """`rlab continue --dry-run` on the demo spec, with the demo's committed evals as its pilot, plans each
    endpoint at alpha / m with the m the demo's report uses (65 secondary comparisons, not a count from above):
    the report's arms, references and metrics, less what it leaves out of every family (passkey's 8 keys and
    train/val BPB's few documents: too few units; the base's CORE and BPB at its own length: not comparable;
    dynamic-ntk zero-shot at windows within L0: no variation). With no pilot the count stays from above."""

    shutil.copytree(REPO_ROOT / "results" / "demo", tmp_path / "demo")
    spec = load_spec(tmp_path / "demo" / "spec.resolved.yaml", results_dir=tmp_path)
    report = collect(ExperimentLayout(tmp_path, "demo"), draws=200).comparisons
    counted = {f: int((report["family"] == f).sum()) for f in ("primary", "secondary")}
    assert counted == {"primary": 4, "secondary": 65}  # what comparison.md states
    check = power_spec.check_experiment(spec, l0=256)
    assert check.pilot == "demo"
    sizes = {(p.noise.family, p.noise.family_size) for p in check.plans if p.noise.family != "copy"}
    assert sizes == {("primary", 4), ("secondary", 65)}
    assert any("alpha 0.00077 = 0.05/65" in w for w in check.warnings())
    planned = power_spec.planned_units(spec, 256)
    assert power_spec.family_sizes(spec, planned, 256)["secondary"] >= 60  # no pilot: from above
