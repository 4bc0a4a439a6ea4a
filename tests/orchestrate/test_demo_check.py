"""The demo's go/no-go check: passes on a base that copies, stops with a clear message on one that does not."""

from __future__ import annotations

import pytest

from rlab.orchestrate.demo_check import MIN_GAIN, CheckResult, DemoCheckError, require_pass


def _row(window: int, gain: float, low: float) -> dict:
    return {
        "window": window,
        "distance": window - 40,
        "control_nats": 5.0,
        "copy_nats": 5.0 - gain,
        "gain": gain,
        "gain_ci_low": low,
        "gain_ci_high": gain + 0.2,
        "copy_acc": 0.5,
        "n": 32,
    }


def test_the_check_reads_the_longest_window_within_l0():
    result = CheckResult(256, [_row(128, 4.0, 3.8), _row(256, 3.0, 2.7)])
    assert result.at_l0["window"] == 256 and result.passed
    require_pass(result, "demo")  # no exception


@pytest.mark.parametrize(
    "gain,low", [(0.05, -0.1), (MIN_GAIN + 0.1, MIN_GAIN - 0.1), (float("nan"), float("nan"))]
)
def test_no_go_says_what_was_measured_and_what_to_do(gain, low):
    result = CheckResult(256, [_row(128, 4.0, 3.8), _row(256, gain, low)])
    assert not result.passed
    with pytest.raises(DemoCheckError, match="does not use context within its training length 256") as info:
        require_pass(result, "demo")
    assert "Pretrain longer" in info.value.hint
