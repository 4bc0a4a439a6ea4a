"""Calibration of the long-context estimands: null experiments through their own code keep what they print.

Short-context retention: false positives of the paired test of "keeps 100%" at most 5% plus Monte Carlo
tolerance and 95% intervals covering at least 93%, on normal, heavy-tailed and skewed per-document differences
and on CORE examples; effective length: bootstrap intervals covering the true length (curves far from and near
the threshold, absolute and relative). The simulator is `tests/report/calibration_estimands.py`.
"""

from __future__ import annotations

import math

import pytest

from tests.report import calibration_estimands as cal

N_SIMS = 300
TOLERANCE = 3 * math.sqrt(0.05 * 0.95 / N_SIMS)


# Skewed retention (centred exponential differences at 40 documents) passes with the report's skew-corrected test
# (issue 37): false positives 0.050, 0.047, 0.053, 0.060 and coverage 0.950, 0.957, 0.950, 0.940 over 300
# experiments at seeds 0-3 (so no xfail).
@pytest.mark.parametrize("scenario", list(cal.SCENARIOS))
def test_null_estimands_keep_false_positives_and_coverage(scenario):
    r = cal.simulate(scenario, N_SIMS)
    if not math.isnan(r.false_positive):
        assert r.false_positive <= 0.05 + TOLERANCE, r
    assert r.coverage >= 0.93, r


def test_choosing_key_tokens_on_their_own_losses_would_favour_the_base():
    """Why the selection is cross-fitted: the in-sample choice rejects a true null far more often than 5%."""
    r = cal.simulate("key-token BPB, in-sample choice (not used)", 100)
    assert r.false_positive > 0.3, r
