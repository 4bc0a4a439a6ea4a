"""Calibration: null experiments through the report's own estimators keep the printed guarantees.

False positives at most the nominal 5% plus a Monte Carlo tolerance, 95% intervals covering at least 95% less the
same tolerance (at 800 experiments, the table in docs/statistics.md, every coverage is >= 94%), for every verdict type (BPB by document, CORE by task, passkey by key, copy by record) at one, 3 and 5 seeds,
on skewed, heavy-tailed and unequal-length nulls, and the familywise error of Holm families of 10 (60: slow)
correlated skewed nulls and of plasmode nulls from the committed demo at most 5% plus tolerance. The simulator is
`tests/report/calibration.py` (`python -m tests.report.calibration` prints the table at more experiments).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlab.report.stats import inference as inf
from rlab.report.stats import plasmode
from tests.report import calibration as cal

N_SIMS = 300
TOLERANCE = 3 * math.sqrt(0.05 * 0.95 / N_SIMS)  # three Monte Carlo standard errors of a 5% rate (3.8 points)


@pytest.mark.parametrize("scenario", list(cal.SCENARIOS))
def test_null_experiments_keep_false_positives_and_coverage(scenario):
    r = cal.simulate(scenario, N_SIMS)
    if not math.isnan(r.false_positive):
        assert r.false_positive <= 0.05 + TOLERANCE, r
    assert r.coverage >= 0.95 - TOLERANCE, (
        r
    )  # 91.2% at 300 experiments; at 800 (docs/statistics.md) all >= 94%


def test_holm_families_of_correlated_skewed_nulls_keep_the_familywise_error():
    n = 100
    assert cal.familywise(n, m=10) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


@pytest.mark.slow
def test_a_holm_family_of_sixty_correlated_skewed_nulls_keeps_the_familywise_error():
    n = 200
    assert cal.familywise(n, m=60) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


def test_plasmode_nulls_from_the_demo_keep_the_familywise_error_and_coverage():
    """The committed demo's own per-document BPB differences at 2048 tokens, centred and resampled."""
    units = cal.demo_units(2048)
    assert len(units) >= 4 and all(u.n_units >= 20 for u in units)
    e = plasmode.family_error("demo", units, reps=100)
    assert e.familywise <= 0.05 + 3 * e.mc_se and e.coverage >= 0.93


def test_the_demos_plasmode_excess_comes_from_resamples_that_miss_its_dominant_document():
    """Why the check above was above nominal on the first two-seed demo: with the document that carries most of the variance in the resample, the test
    keeps its level; without it (a third of resamples from 32 documents) the sample's mean is off by ~1 se."""
    z = max(cal.demo_units(2048), key=lambda u: float((u.z**2).max() / (u.z**2).sum())).z
    dominant = int(np.argmax(np.abs(z)))
    rng = np.random.default_rng(0)
    seen, unseen = [], []
    for _ in range(300):
        idx = rng.integers(0, len(z), len(z))
        c = inf.compare(z[idx], np.zeros(len(z)), rng=rng, draws=2000, stop_hits=plasmode.STOP_HITS)
        (seen if dominant in idx else unseen).append(c.p_value is not None and c.p_value <= inf.ALPHA)
    assert np.mean(seen) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / len(seen))
    assert np.mean(unseen) > 0.10
