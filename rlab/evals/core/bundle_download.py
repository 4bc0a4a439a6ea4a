"""Download nanochat's public CORE eval bundle and install it atomically under <base>/eval_bundle.

The zip holds one top-level `eval_bundle/` folder. It is downloaded to a temporary file beside
the target, extracted into a temporary folder, checked (`core.yaml`, `eval_meta_data.csv`, every
task file parses, hashes compared by `verify_bundle`), and only then renamed into place, so an
interrupted download never leaves a half bundle that later evals would score.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from rlab.errors import EvalError
from rlab.evals.core.bundle import load_bundle, load_task_data, verify_bundle

log = logging.getLogger(__name__)

BUNDLE_URL = "https://karpathy-public.s3.us-west-2.amazonaws.com/eval_bundle.zip"


def find_bundle_root(extracted: Path) -> Path:
    """The folder inside an extracted zip that holds core.yaml (the zip's `eval_bundle/`)."""
    hits = sorted(p.parent for p in extracted.rglob("core.yaml"))
    if not hits:
        raise EvalError(f"The downloaded archive has no core.yaml (extracted to {extracted}).")
    return min(hits, key=lambda p: len(p.parts))


def check_extracted(root: Path) -> None:
    """Every configured task parses; files missing or differing from nanochat's are logged."""
    bundle = load_bundle(root)
    for task in bundle.tasks:
        load_task_data(task)
    for c in verify_bundle(root):
        if c.status != "ok":
            log.warning("bundle file %s: %s", c.dataset_uri, c.status)


def install_from_zip(zip_path: Path, target: Path, force: bool = False) -> Path:
    """Extract `zip_path`, check it, and move its bundle folder to `target` (atomically)."""
    target = Path(target)
    if target.exists() and not force:
        raise EvalError(
            f"{target} already exists.", "Check it with `rlab bundle check`, or pass --force to replace it."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".eval_bundle.") as tmp:
        try:
            with zipfile.ZipFile(zip_path) as zf:
                zf.extractall(tmp)
        except zipfile.BadZipFile as exc:
            raise EvalError(f"{zip_path} is not a valid zip archive: {exc}", "Download it again.") from None
        root = find_bundle_root(Path(tmp))
        check_extracted(root)
        if target.exists():
            shutil.rmtree(target)
        root.rename(target)
    log.info("installed CORE bundle at %s", target)
    return target


def download_bundle(target: Path, url: str = BUNDLE_URL, force: bool = False, timeout: float = 60.0) -> Path:
    """Download the zip from `url` and install it at `target`."""
    target = Path(target)
    if target.exists() and not force:
        raise EvalError(
            f"{target} already exists.", "Check it with `rlab bundle check`, or pass --force to replace it."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".eval_bundle.", suffix=".zip") as tmp:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                shutil.copyfileobj(resp, tmp)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise EvalError(
                f"Could not download {url}: {exc}", "Check the network, or copy a bundle by hand."
            ) from None
        tmp.flush()
        return install_from_zip(Path(tmp.name), target, force=force)
