"""The estimands' tests for `rlab report --calibrate`: their one-seed per-unit contributions, grouped by family.

The plasmode check (`rlab.report.stats.plasmode`) re-runs a family's tests on the experiment's own units made null. The
report's tables give it their families through their frames; the estimands' rows do not carry what a test rested
on, so their analyses are run once more here while `inference.recording_units` records it (seconds: no eval data
is read again). Short-context retention is a level, not a Holm family: its plasmode line reports the coverage of
its ratio intervals (the delta-method values against 1, `ratio.paired_ratio`); key-token BPB is its own Holm
family. Effective length has no test (a bootstrap interval; its calibration is
`tests/report/calibration_estimands.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlab.report.estimands import key_tokens, retention
from rlab.report.stats import inference as inf

if TYPE_CHECKING:
    from rlab.report.assemble.measured import Measured

RETENTION_FAMILY = "short-context retention (levels, no Holm)"


def families(data: Measured, seed: int = 0) -> dict[str, list[inf.UnitContributions]]:
    """Family name -> the one-seed tests of that estimand (none where every arm has several seeds)."""
    with inf.recording_units() as recorded:
        rows = retention.analyse(data, seed)
    ratios = [(r.keeps_pct / 100.0 - 1.0, r.n_units) for r in rows if r.keeps_pct is not None]
    shifts = [
        u for u in recorded if any(abs(u.estimate - e) < 1e-9 and u.n_units == n for e, n in ratios)
    ]  # the ratio's interval; the raw test of equal sums beside it is left out
    with inf.recording_units() as paired:
        key_tokens.analyse(data, seed)
    out = {RETENTION_FAMILY: shifts, key_tokens.FAMILY: list(paired)}
    return {name: units for name, units in out.items() if units}
