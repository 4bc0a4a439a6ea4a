"""Experiment tracking (wandb) settings."""

from __future__ import annotations

from typing import Literal

from rlab.spec.base import StrictModel


class TrackingSpec(StrictModel):
    """wandb logging. Offline by default: it never needs a network or an account."""

    wandb: Literal["disabled", "offline", "online"] = "offline"
    """disabled, offline (local files, `wandb sync` later) or online."""
    project: str = "rlab"
    """wandb project; runs are grouped by experiment and named by tag."""
