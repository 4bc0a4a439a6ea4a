"""prepare_data on user corpora: layout, manifest, idempotence, interruption, bad inputs, the CLI."""

from __future__ import annotations

import json
import shutil
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlab.cli.app import main
from rlab.data.prepare import IN_PROGRESS_NAME, PrepareOptions, prepare_data
from rlab.errors import DataError
from rlab.paths import BaseLayout
from tests.conftest import TINY_VOCAB_SIZE, make_english_docs

SMALL = PrepareOptions(long_min_chars=10**9, shard_chars=5_000, row_groups=2)


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "nested").mkdir(parents=True)
    docs = make_english_docs(12, seed=5, min_sentences=8, max_sentences=12)
    for i, text in enumerate(docs[:6]):
        (folder / f"{i}.txt").write_text(text, encoding="utf-8")
    (folder / "nested" / "rows.jsonl").write_text(
        "\n".join(json.dumps({"text": t}) for t in docs[6:9]) + "\n"
    )
    pq.write_table(pa.table({"text": docs[9:], "year": [1, 2, 3]}), folder / "nested" / "rows.parquet")
    (folder / "ignored.md").write_text("not corpus text")
    return folder


def test_tiny_base_dir_layout(tiny_base_dir):
    layout = BaseLayout(tiny_base_dir)
    manifest = json.loads(layout.corpus_manifest.read_text())
    shards = sorted(p.name for p in layout.data_dir.glob("*.parquet"))
    assert shards == manifest["shards"] and shards[-1] == manifest["val_shard"] and len(shards) >= 3
    for name in shards:
        assert pq.ParquetFile(layout.data_dir / name).num_row_groups >= 2
    assert manifest["vocab_size"] == TINY_VOCAB_SIZE
    stats = manifest["stats"]
    assert stats["docs"]["long"] == 3 and stats["docs"]["val"] >= 1
    assert 2.0 < stats["chars_per_token"] < 6.0
    assert (layout.long_docs_dir / "long_docs.parquet").is_file()
    assert not (tiny_base_dir / IN_PROGRESS_NAME).exists()


def test_reads_all_formats_and_is_idempotent(tmp_path, corpus):
    base = tmp_path / "base"
    first = prepare_data(base, [corpus], vocab_size=300, options=SMALL)
    assert not first.skipped and sum(first.manifest["stats"]["docs"].values()) == 12
    second = prepare_data(base, [corpus], vocab_size=300, options=SMALL)
    assert second.skipped and second.manifest == first.manifest
    with pytest.raises(DataError, match="prepared differently"):
        prepare_data(base, [corpus], vocab_size=320, options=SMALL)
    forced = prepare_data(base, [corpus], vocab_size=320, options=SMALL, force=True)
    assert not forced.skipped and forced.manifest["vocab_size"] == 320


def test_interrupted_prepare_is_redone(tmp_path, corpus):
    base = tmp_path / "base"
    prepare_data(base, [corpus], vocab_size=300, options=SMALL)
    layout = BaseLayout(base)
    layout.corpus_manifest.unlink()  # as if killed before the manifest was written
    (base / IN_PROGRESS_NAME).write_text("{}")
    again = prepare_data(base, [corpus], vocab_size=300, options=SMALL)
    assert not again.skipped and layout.corpus_manifest.is_file() and not (base / IN_PROGRESS_NAME).exists()


def test_foreign_data_is_not_overwritten_without_force(tmp_path, corpus):
    layout = BaseLayout(tmp_path / "base")
    layout.data_dir.mkdir(parents=True)
    pq.write_table(pa.table({"text": ["nanochat's own shard"]}), layout.data_dir / "shard_00000.parquet")
    with pytest.raises(DataError, match="rlab did not prepare"):
        prepare_data(layout.root, [corpus], vocab_size=300, options=SMALL)
    prepare_data(layout.root, [corpus], vocab_size=300, options=SMALL, force=True)
    texts = pq.read_table(layout.data_dir / "shard_00000.parquet").column("text").to_pylist()
    assert "nanochat's own shard" not in texts


def _bad(tmp_path, name: str, payload: bytes) -> object:
    folder = tmp_path / "bad"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(payload)
    return folder


@pytest.mark.parametrize(
    "name,payload,match",
    [
        ("x.txt", b"\xff\xfe\x00 bad bytes \x81", "not UTF-8"),
        ("x.jsonl", b'{"text": "ok"}\n{oops\n', r"x.jsonl:2 is not valid JSON"),
        ("x.jsonl", b'{"body": "no text field"}\n', "no string 'text' field"),
        ("x.parquet", b"PAR1 not really parquet", "Cannot read parquet"),
        ("x.txt", b"   \n\n  ", "contains no text"),
    ],
)
def test_bad_files_give_one_line_errors(tmp_path, name, payload, match):
    with pytest.raises(DataError, match=match) as info:
        prepare_data(tmp_path / "base", [_bad(tmp_path, name, payload)], vocab_size=300)
    assert "\n" not in info.value.message


def test_bad_corpus_inputs(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no .txt, .jsonl or .parquet files"):
        prepare_data(tmp_path / "base", [tmp_path / "empty"])
    pq.write_table(pa.table({"body": ["x", "y"]}), tmp_path / "notext.parquet")
    with pytest.raises(DataError, match="has no 'text' column"):
        prepare_data(tmp_path / "base", [tmp_path / "notext.parquet"], vocab_size=300)
    with pytest.raises(DataError, match="does not exist"):
        prepare_data(tmp_path / "base", [tmp_path / "missing"])
    with pytest.raises(DataError, match="too small"):
        prepare_data(tmp_path / "base", [tmp_path / "notext.parquet"], vocab_size=264)


def _run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:

    monkeypatch.setattr(sys, "argv", ["rlab", *args])
    monkeypatch.setenv("COLUMNS", "300")  # no line wrapping in the captured output
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_prepare_then_noop_then_error(tmp_path, corpus, monkeypatch, capsys):
    base = str(tmp_path / "base")
    args = ["data", "prepare", "--corpus", str(corpus), "--base-dir", base, "--vocab-size", "300"]
    code, out, _ = _run_cli(monkeypatch, capsys, *args)
    assert code == 0 and "chars/token" in out and "train" in out
    code, out, _ = _run_cli(monkeypatch, capsys, *args)
    assert code == 0 and "already prepared" in out and "nothing to do" in out
    (tmp_path / "empty").mkdir()
    code, _, err = _run_cli(
        monkeypatch,
        capsys,
        "data",
        "prepare",
        "--corpus",
        str(tmp_path / "empty"),
        "--base-dir",
        str(tmp_path / "b2"),
    )
    assert code == 1 and "Error:" in err and "Traceback" not in err


def test_prepared_base_with_missing_outputs_is_not_called_prepared(tiny_base_dir, tmp_path):

    base = tmp_path / "base"
    shutil.copytree(tiny_base_dir, base)
    redo = dict(
        corpus=[tiny_base_dir.parent / "corpus"],
        vocab_size=TINY_VOCAB_SIZE,
        options=PrepareOptions(
            seed=0, val_fraction=0.1, long_min_chars=12_000, long_per_era=3, shard_chars=60_000, row_groups=3
        ),
    )
    assert prepare_data(base, **redo).skipped  # the same request: nothing to do
    layout = BaseLayout(base)
    shutil.rmtree(layout.long_docs_dir)
    with pytest.raises(DataError, match="long_docs/ is missing") as missing:
        prepare_data(base, **redo)
    assert "rlab data long-docs" in missing.value.hint
    (layout.tokenizer_dir / "token_bytes.pt").unlink()
    with pytest.raises(DataError, match="tokenizer/token_bytes.pt") as missing:
        prepare_data(base, **redo)
    assert "--force" in missing.value.hint
    assert not prepare_data(base, force=True, **redo).skipped and layout.long_docs_file.is_file()
