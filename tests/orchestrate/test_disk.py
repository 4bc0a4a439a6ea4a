"""The disk check: what a continue writes (hard-linked clones cost nothing; at most keep_last + 1 saves at once),
a margin, and one verdict in MiB whose two printed numbers never contradict it."""

from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlab.orchestrate.disk import MIB, DiskPlan, clones_are_links, plan_disk, saves_at_peak
from rlab.spec.train import TrainSpec
from tests.cli.harness import run_main
from tests.cli.test_fuzz import FUZZ
from tests.orchestrate.helpers import fake_torchrun, make_checkpoint, write_spec


@pytest.mark.parametrize(
    "train, saves",
    [
        ({"steps": 100}, 1),  # only the final save
        ({"steps": 100, "save_every": 25}, 4),  # 25, 50, 75, 100 (the last is also periodic)
        ({"steps": 60, "save_every": 25}, 3),  # 25, 50, then the final 60
        ({"steps": 100, "save_every": 10, "keep_last": 2}, 3),  # two kept + the one being written
        ({"steps": 4, "save_every": 1, "keep_last": 3}, 4),
    ],
)
def test_saves_at_peak(train, saves):
    assert saves_at_peak(TrainSpec(**train)) == saves


def test_a_hard_linked_clone_costs_nothing(tmp_path):
    ckpt = make_checkpoint(tmp_path / "base", "d20", steps=(20,), size=MIB)
    assert clones_are_links(ckpt.parent) and not list(ckpt.parent.glob(".rlab-link-probe*"))
    plan = plan_disk(TrainSpec(steps=10), ckpt, 20, tags=2, copied=2)
    one = sum(p.stat().st_size for p in ckpt.iterdir())  # model, meta, two optimizer shards of 1 MiB
    assert plan.clones == 0 and plan.saves == 1 and plan.one == one and one > 2 * MIB
    assert plan.need == 2 * plan.one


@FUZZ
@given(
    one=st.integers(0, 2**40), tags=st.integers(1, 64), saves=st.integers(1, 100), free=st.integers(0, 2**50)
)
def test_the_verdict_never_contradicts_its_numbers(one, tags, saves, free):
    plan = DiskPlan(tags=tags, clones=0, saves=saves, one=one, free=free, root=Path("/x"))
    problem = plan.problem()
    assert (problem is None) == plan.fits
    if problem is not None:
        needed, available = (
            int(n.replace(",", "")) for n in re.findall(r"([\d,]+) MiB (?:needed|free)", problem)
        )
        assert needed > available and available == free // MIB
        assert needed * MIB >= plan.need * 1.1 - 1  # the margin is in the number shown


@pytest.fixture
def disk_160mib(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", str(mount)]).returncode
    ):
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_run_that_fits_is_not_refused(tmp_path, disk_160mib):
    """~94 MiB to write with 128+ MiB free goes ahead; 188 MiB is refused, both sizes said in MiB (at GB
    precision the two would read alike, "0.1 GB needed, 0.1 GB free")."""
    base = disk_160mib / "base"
    ckpt = make_checkpoint(
        base, "d20", steps=(20,), size=int(11.75 * MIB)
    )  # ~23.5 MiB a checkpoint, on the disk
    one = sum(p.stat().st_size for p in ckpt.iterdir())
    spec = write_spec(
        tmp_path,
        f"name: dk\ntrain: {{steps: 4, save_every: 1, keep_last: 3}}\nlaunch: {{torchrun: {fake_torchrun(tmp_path)}}}\n",
    )
    common = ["continue", "--spec", str(spec), "--base-dir", str(base), "--from-step", "20", "--dry-run"]
    common += ["--no-control"]  # the sizes below count the named variants only
    fits = run_main(*common, "--variants", "pi")  # 4 x 23.5 = 94 MiB (+10%: 104) of ~136 free
    assert fits.code == 0 and "Not enough disk" not in fits.text, fits.text
    refused = run_main(*common, "--variants", "pi,yarn")  # 188 MiB (+10%: 207)
    assert refused.code == 1
    text = " ".join(refused.err.split())
    needed, free = (int(n.replace(",", "")) for n in re.findall(r"([\d,]+) MiB (?:needed|free)", text))
    assert needed == math.ceil(2 * 4 * one * 1.1 / MIB) and 130 <= free < needed, text
    assert f"4 checkpoint(s) of {one / MIB:,.1f} MiB per tag, +10% margin" in text
