"""Calibration: null experiments through the report's own estimators keep the printed guarantees.

False positives at most the nominal 5% plus a Monte Carlo tolerance, 95% intervals covering at least 93% of the
time, for every verdict type (BPB by document, CORE by task, passkey by key, copy by record) at one, 3 and 5 seeds,
and the familywise error of a Holm family of 10 nulls at most 5% plus tolerance. The simulator is
`tests/report/calibration.py` (`python -m tests.report.calibration` prints the table at more experiments).
"""

from __future__ import annotations

import math

import pytest

from tests.report import calibration as cal

N_SIMS = 400
TOLERANCE = 3 * math.sqrt(0.05 * 0.95 / N_SIMS)  # three Monte Carlo standard errors of a 5% rate (3.3 points)


@pytest.mark.parametrize("scenario", list(cal.SCENARIOS))
def test_null_experiments_keep_false_positives_and_coverage(scenario):
    r = cal.simulate(scenario, N_SIMS)
    if not math.isnan(r.false_positive):
        assert r.false_positive <= 0.05 + TOLERANCE, r
    assert r.coverage >= 0.93, r


def test_a_holm_family_of_ten_nulls_keeps_the_familywise_error():
    n = 200
    assert cal.familywise(n) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)
