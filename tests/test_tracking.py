"""Tracker selection: wandb only on rank 0 when enabled; a null object everywhere else."""

from __future__ import annotations

import socket

import pytest

from rlab.errors import RlabError
from rlab.spec.tracking import TrackingSpec
from rlab.tracking import NullTracker, WandbTracker, make_tracker

pytestmark = pytest.mark.usefixtures("one_thread")


def test_null_tracker_when_disabled_or_not_rank0(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert isinstance(make_tracker(TrackingSpec(wandb="disabled"), "e", "t", tmp_path, {}, True), NullTracker)
    assert isinstance(make_tracker(TrackingSpec(wandb="offline"), "e", "t", tmp_path, {}, False), NullTracker)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert isinstance(make_tracker(TrackingSpec(wandb="online"), "e", "t", tmp_path, {}, True), NullTracker)


@pytest.mark.slow
def test_offline_wandb_run_groups_by_experiment(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    tracker = make_tracker(
        TrackingSpec(wandb="offline", project="rlab-test"), "exp1", "d2-pi", tmp_path, {"lr": 0.1}, True
    )
    assert isinstance(tracker, WandbTracker)
    assert tracker._run.group == "exp1" and tracker._run.name == "d2-pi"
    tracker.log({"train/loss": 1.0}, step=1)
    tracker.finish()
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_online_wandb_without_a_network_fails_fast_with_the_offline_hint(tmp_path, monkeypatch):
    """Issue 42, finding 7: `online` with no network spent 2 minutes in wandb's retries before failing, with no
    hint to use `offline`. The server is tried once (a few seconds at most) before wandb starts."""

    tried = []

    def unreachable(address, timeout=None):
        tried.append((address, timeout))
        raise OSError(101, "Network is unreachable")

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example:8443")
    monkeypatch.setattr(socket, "create_connection", unreachable)
    with pytest.raises(RlabError, match="wandb.example:8443 cannot be reached") as info:
        make_tracker(TrackingSpec(wandb="online"), "exp", "tag", tmp_path, {}, is_main=True)
    assert "tracking.wandb: offline" in (info.value.hint or "")
    assert tried == [(("wandb.example", 8443), 5.0)]
