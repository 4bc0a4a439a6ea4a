"""Export tests load folders with transformers offline; its remote-code modules go to a private cache, not ~/.cache."""

from __future__ import annotations

import os
import tempfile

# Read by transformers when it is first imported (collection imports no transformers, so this comes first).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_MODULES_CACHE", tempfile.mkdtemp(prefix="rlab-hf-modules-"))
