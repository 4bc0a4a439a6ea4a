"""The from-scratch model's spec: a window pattern only where the architecture has windows."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlab.spec.train import ModelSpec


def test_window_pattern_needs_the_2026_architecture():
    assert ModelSpec(architecture="nanochat-2026", window_pattern="SSSL").window_pattern == "SSSL"
    with pytest.raises(ValidationError, match="sliding windows are a nanochat-2026 part"):
        ModelSpec(window_pattern="SL")
    with pytest.raises(ValidationError, match="window_pattern"):
        ModelSpec(architecture="nanochat-2026", window_pattern="SXL")
    with pytest.raises(ValidationError, match="architecture"):
        ModelSpec(architecture="llama")
