"""Long-document set: built for any base dir from user files, whole documents, manifest, checks on load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rlab.data.long_docs as ld
from rlab.core.tokenizer import Tokenizer
from rlab.data.long_docs import (
    build_long_docs,
    ensure_long_docs,
    load_long_docs,
    read_long_docs_manifest,
    set_sha256,
)
from rlab.errors import DataError
from rlab.paths import BaseLayout
from tests.cli.harness import assert_user_error, run_main
from tests.conftest import make_english_docs


@pytest.fixture
def foreign_base(tiny_base_dir, tmp_path) -> Path:
    """A base dir with shards and a tokenizer but no long-document set and no rlab manifest (like a nanochat dir)."""
    base = tmp_path / "foreign"
    shutil.copytree(tiny_base_dir / "base_data", base / "base_data")
    shutil.copytree(tiny_base_dir / "tokenizer", base / "tokenizer")
    return base


@pytest.fixture
def sources(tmp_path) -> Path:
    """Three long documents (.txt), one short one, one duplicate (.jsonl)."""
    folder = tmp_path / "texts"
    folder.mkdir()
    long = make_english_docs(3, seed=11, min_sentences=120, max_sentences=130)
    for i, text in enumerate(long):
        (folder / f"book_{i}.txt").write_text(text, encoding="utf-8")
    (folder / "short.txt").write_text(make_english_docs(1, seed=12, min_sentences=3, max_sentences=4)[0])
    (folder / "dup.jsonl").write_text(json.dumps({"text": long[0]}) + "\n")
    return folder


def test_builds_from_user_files_for_a_foreign_base(foreign_base, sources):
    shards = {p.name: p.read_bytes() for p in (foreign_base / "base_data").iterdir()}
    tok = (foreign_base / "tokenizer" / "tokenizer.pkl").read_bytes()
    m = build_long_docs(foreign_base, [sources], min_tokens=500)
    assert len(m.docs) == 3 and m.excluded == {"duplicate": 1, "too_short": 1}
    assert all(d.tokens >= 500 for d in m.docs)
    assert [d.sha256 for d in m.docs] == sorted(d.sha256 for d in m.docs)  # fixed order: by text hash
    assert m.set_sha256 == set_sha256(m.tokenizer_sha256, m.docs)
    assert m.sources[0].name == "user" and m.sources[0].offered == 5 and m.sources[0].kept == 3
    assert m.overlap_check.startswith("checked")
    # shards and tokenizer untouched
    assert {p.name: p.read_bytes() for p in (foreign_base / "base_data").iterdir()} == shards
    assert (foreign_base / "tokenizer" / "tokenizer.pkl").read_bytes() == tok
    loaded = load_long_docs(foreign_base)
    assert loaded.doc_ids == [d.doc_id for d in m.docs]
    # documents are whole: each text is one of the source texts, token counts match the tokenizer

    tokenizer = Tokenizer.from_directory(foreign_base / "tokenizer")
    originals = {p.read_text() for p in sources.glob("book_*.txt")}
    for text, entry in zip(loaded.texts, m.docs):
        assert text in originals and len(tokenizer.encode(text)) == entry.tokens


def test_training_documents_are_left_out(foreign_base, sources):
    train_text = (
        pq.read_table(sorted((foreign_base / "base_data").glob("*.parquet"))[0]).column("text")[0].as_py()
    )
    (sources / "leak.txt").write_text(train_text, encoding="utf-8")
    m = build_long_docs(foreign_base, [sources], min_tokens=1)
    assert m.excluded.get("in_training_shards") == 1
    assert train_text not in load_long_docs(foreign_base).texts


def test_nothing_long_enough_is_an_error_and_writes_nothing(foreign_base, sources):
    with pytest.raises(DataError, match="--min-tokens"):
        build_long_docs(foreign_base, [sources], min_tokens=10**7)
    assert read_long_docs_manifest(foreign_base) is None
    assert not BaseLayout(foreign_base).long_docs_file.exists()


def test_load_detects_an_edited_set_and_another_tokenizer(foreign_base, sources, tiny_base_dir):
    build_long_docs(foreign_base, [sources], min_tokens=500)
    layout = BaseLayout(foreign_base)
    table = pq.read_table(layout.long_docs_file)
    texts = table.column("text").to_pylist()
    texts[0] = texts[0] + " edited"
    pq.write_table(
        table.set_column(table.schema.get_field_index("text"), "text", [texts]), layout.long_docs_file
    )
    with pytest.raises(DataError, match="does not match its manifest"):
        load_long_docs(foreign_base)
    build_long_docs(foreign_base, [sources], min_tokens=500)
    (layout.tokenizer_dir / "tokenizer.pkl").write_bytes(
        b"other" + (layout.tokenizer_dir / "tokenizer.pkl").read_bytes()
    )
    with pytest.raises(DataError, match="another tokenizer"):
        load_long_docs(foreign_base)


def test_ensure_builds_once(foreign_base, sources, monkeypatch):

    monkeypatch.setattr(ld, "default_sources", lambda layout: [str(sources)])
    m1, built1 = ensure_long_docs(foreign_base, 500)
    m2, built2 = ensure_long_docs(foreign_base, 500)
    assert built1 and not built2 and m1.set_sha256 == m2.set_sha256


def test_prepare_writes_a_set_with_a_manifest_and_no_training_text(tiny_base_dir):
    m = read_long_docs_manifest(tiny_base_dir)
    assert m is not None and len(m.docs) >= 3 and m.overlap_check.startswith("not needed")
    train_shards = sorted((tiny_base_dir / "base_data").glob("*.parquet"))[:-1]
    train_texts = {t for p in train_shards for t in pq.read_table(p).column("text").to_pylist()}
    assert not train_texts & set(load_long_docs(tiny_base_dir).texts)
    corpus = json.loads((tiny_base_dir / "rlab_corpus.json").read_text())
    assert corpus["long_doc_set"]["sha256"] == m.set_sha256


def test_cli_long_docs(foreign_base, sources):

    args = [
        "data",
        "long-docs",
        "--base-dir",
        str(foreign_base),
        "--from",
        str(sources),
        "--min-tokens",
        "500",
    ]
    res = run_main(*args)
    assert res.code == 0, res.err
    assert "3 documents" in res.out
    again = run_main(*args)
    assert again.code == 0 and "already has a long-document set" in " ".join(again.out.split())
    assert_user_error(
        run_main("data", "long-docs", "--base-dir", str(foreign_base / "nope")), "has no tokenizer/ folder"
    )


def test_unwritable_long_docs_folder_is_a_clear_error(foreign_base, sources):
    (foreign_base / "long_docs").write_text("a file where the folder should be")
    with pytest.raises(DataError, match="Cannot write the long-document set"):
        build_long_docs(foreign_base, [sources], min_tokens=500)
