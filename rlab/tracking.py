"""Experiment tracking behind one small interface, so training code never branches on wandb.

`make_tracker` returns a `WandbTracker` on rank 0 when tracking is on, and a `NullTracker`
otherwise (other ranks, `tracking.wandb: disabled`, or `WANDB_MODE=disabled` — wandb's own
switch, honoured so that test suites and CI can turn it off globally). wandb is imported only
when a run is actually tracked; offline mode is the default and needs no network or account.
Runs are grouped by experiment and named by tag.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from rlab.errors import RlabError
from rlab.spec.tracking import TrackingSpec

logger = logging.getLogger(__name__)


class Tracker(Protocol):
    def log(self, data: dict[str, Any], step: int) -> None: ...

    def finish(self, exit_code: int = 0) -> None: ...


class NullTracker:
    """Tracks nothing."""

    def log(self, data: dict[str, Any], step: int) -> None:
        pass

    def finish(self, exit_code: int = 0) -> None:
        pass


class WandbTracker:
    """A wandb run (offline or online)."""

    def __init__(self, spec: TrackingSpec, experiment: str, tag: str, run_dir: Path, config: dict[str, Any]):
        if spec.wandb == "online":
            check_wandb_reachable()
        try:
            import wandb
        except ImportError:
            raise RlabError(
                "wandb tracking is enabled but wandb is not installed.",
                hint="pip install wandb, or set tracking.wandb: disabled.",
            ) from None
        run_dir.mkdir(parents=True, exist_ok=True)
        self._run = wandb.init(
            project=spec.project,
            group=experiment,
            name=tag,
            dir=str(run_dir),
            mode=spec.wandb,
            config=config,
            reinit="finish_previous",
        )

    def log(self, data: dict[str, Any], step: int) -> None:
        self._run.log(data, step=step)

    def finish(self, exit_code: int = 0) -> None:
        self._run.finish(exit_code=exit_code)


WANDB_CONNECT_TIMEOUT_S = 5.0
"""How long `online` waits for wandb's server before failing (wandb itself retries for minutes)."""


def check_wandb_reachable(timeout_s: float = WANDB_CONNECT_TIMEOUT_S) -> None:
    """Fail fast, with the `offline` hint, when wandb's server ($WANDB_BASE_URL, default api.wandb.ai) cannot be
    reached: wandb.init would otherwise spend minutes retrying before it gives up."""

    url = urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    host, port = url.hostname or "api.wandb.ai", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise RlabError(
            f"tracking.wandb is online but {host}:{port} cannot be reached ({exc.strerror or exc}).",
            hint="Set tracking.wandb: offline (runs are kept locally; `wandb sync` uploads them later), or "
            "disabled.",
        ) from None


def make_tracker(
    spec: TrackingSpec, experiment: str, tag: str, run_dir: Path, config: dict[str, Any], is_main: bool
) -> Tracker:
    """The tracker for this process."""
    if not is_main or spec.wandb == "disabled" or os.environ.get("WANDB_MODE") == "disabled":
        return NullTracker()
    return WandbTracker(spec, experiment, tag, run_dir, config)
