"""Export tests load folders with transformers offline; its remote-code modules go to a private cache, not ~/.cache."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from rlab.paths import BaseLayout

# Read by transformers when it is first imported (collection imports no transformers, so this comes first).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_MODULES_CACHE", tempfile.mkdtemp(prefix="rlab-hf-modules-"))


@pytest.fixture
def base(tmp_path, tiny_base_dir) -> Path:
    """An empty base dir with the tiny tokenizer (tests write checkpoints into it)."""

    root = tmp_path / "base"
    shutil.copytree(BaseLayout(tiny_base_dir).tokenizer_dir, BaseLayout(root).tokenizer_dir)
    return root
