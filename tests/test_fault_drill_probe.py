"""experiments/probes/fault_drill.py reruns the training-fault tests' attacks on the same job: both take the job,
its command line and the means to break it from `tests.cli.job_faults`, so they cannot drift apart."""

from __future__ import annotations

import pytest

from tests.cli import job_faults
from tests.conftest import load_probe


def test_the_probe_attacks_the_job_the_tests_define(tmp_path):
    probe = load_probe("fault_drill")
    assert probe.jf is job_faults  # the job and its attacks, not copies of them
    drill = probe.Drill(tmp_path)
    args = drill.job_args("d6")
    assert args == job_faults.continue_args(tmp_path / "d6.yaml", tmp_path / "base", tmp_path / "results")
    assert (tmp_path / "d6.yaml").read_text() == job_faults.long_run("d6")
    assert job_faults.long_run_tag("d6") == "smoke-d6-pi" and "steps: 100000" in job_faults.long_run("d6")
    assert "stall_timeout_s: 10}" in job_faults.long_run("s1", stall_timeout_s=10)
    # issue 42's findings 1-6 each have their attack
    assert [k for k in probe.ATTACKS if k.startswith("42.")] == [f"42.{i}" for i in range(1, 7)]


@pytest.mark.slow
def test_the_probe_s_validator_attack_finds_every_bad_spec_refused(tmp_path, capsys):
    """Attack 3 needs no base: 10 bad specs through `rlab validate` in separate processes, each refused in one
    or two lines without a traceback."""
    drill = load_probe("fault_drill").Drill(tmp_path)
    drill.f3_validator()
    (row,) = drill.rows
    assert row["finding"] == "3 validator" and row["now"].startswith(
        "10 of 10 refused with exit 1, no traceback"
    )
    assert "TRACEBACK" not in capsys.readouterr().out
