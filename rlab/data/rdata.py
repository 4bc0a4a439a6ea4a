"""A small reader for R lazy-load databases (`data/Rdata.rdx` + `Rdata.rdb`), standard library only.

Debian's `r-cran-janeaustenr` stores Austen's novels this way, and R is not needed to read
them. The format:

* `.rdx` is a gzip-compressed R serialisation of a list whose `variables` element maps each
  object name to `(offset, length)` in the `.rdb` file;
* each `.rdb` block is a 4-byte big-endian uncompressed size followed by a zlib stream
  (type bytes `2`/`3` after the size select bzip2/xz in newer R), holding one serialised object;
* serialisation is R's XDR format (`X\\n`, big-endian), versions 2 and 3.

`unserialize` understands the object types that data packages hold: atomic vectors,
character vectors, lists, pairlists (attributes), symbols, references and environments
(read and skipped). It returns Python values: character vectors -> `list[str | None]`,
lists -> `list` (a list with names -> `dict`), numbers -> `list[int | float]`, pairlists ->
`[(tag, value), ...]`; other attributes are dropped.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from pathlib import Path
from typing import Any

from rlab.errors import DataError

# R's SEXP type codes (serialize.c) used below.
NILSXP, SYMSXP, LISTSXP, CLOSXP, ENVSXP, PROMSXP, LANGSXP = 0, 1, 2, 3, 4, 5, 6
CHARSXP, LGLSXP, INTSXP, REALSXP, CPLXSXP, STRSXP = 9, 10, 13, 14, 15, 16
DOTSXP, VECSXP, EXPRSXP, RAWSXP, S4SXP = 17, 19, 20, 24, 25
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, UNBOUNDVALUE_SXP, MISSINGARG_SXP = 255, 254, 253, 252, 251
BASENAMESPACE_SXP, NAMESPACESXP, PACKAGESXP, PERSISTSXP = 250, 249, 248, 247
EMPTYENV_SXP, BASEENV_SXP, ATTRLANGSXP, ATTRLISTSXP, ALTREP_SXP = 242, 241, 240, 239, 238
_LATIN1_MASK = 1 << 2
_NO_VALUE = frozenset(  # nodes read as None
    {
        NILVALUE_SXP,
        EMPTYENV_SXP,
        BASEENV_SXP,
        GLOBALENV_SXP,
        UNBOUNDVALUE_SXP,
        MISSINGARG_SXP,
        BASENAMESPACE_SXP,
    }
)
_VECTORS = frozenset((LGLSXP, INTSXP, REALSXP, CPLXSXP, RAWSXP, STRSXP, VECSXP, EXPRSXP, S4SXP))
_PAIRLISTS = frozenset((LISTSXP, LANGSXP, CLOSXP, PROMSXP, DOTSXP, ATTRLANGSXP, ATTRLISTSXP))
_NA_INT = -(2**31)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0
        self.refs: list[Any] = []

    def read_int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def read_bytes(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        if len(out) != n:
            raise DataError("R serialisation ends early (truncated file?).")
        self.pos += n
        return out

    def length(self) -> int:
        n = self.read_int()
        if n == -1:  # long vector: two more ints
            upper, lower = self.read_int(), self.read_int()
            n = (upper << 32) + (lower & 0xFFFFFFFF)
        return n

    def item(self) -> Any:
        flags = self.read_int()
        kind = flags & 0xFF
        if kind in _NO_VALUE:
            return None
        if kind in _VECTORS:
            return self.vector(kind, has_attr=bool(flags & (1 << 9)))  # bit 10 (has tag) is implied here
        return self.node(kind, flags)

    def node(self, kind: int, flags: int) -> Any:
        """A node that is not a vector: references, names, symbols, environments, pairlists, strings."""
        if kind == REFSXP:
            index = flags >> 8
            if index == 0:
                index = self.read_int()
            return self.refs[index - 1]
        if kind in (PERSISTSXP, NAMESPACESXP, PACKAGESXP):
            if self.read_int() != 0:
                raise DataError("Unsupported R serialisation (persistent name with flags).")
            names = [self.item() for _ in range(self.read_int())]
            self.refs.append(names)
            return names
        if kind == SYMSXP:
            name = self.item()
            self.refs.append(name)
            return name
        if kind == ENVSXP:
            self.read_int()  # locked
            env: dict[str, Any] = {}
            self.refs.append(env)
            self.item(), self.item(), self.item(), self.item()  # enclosure, frame, hash table, attributes
            return env
        if kind in _PAIRLISTS:
            return self.pairlist(flags)
        if kind == CHARSXP:
            n = self.read_int()
            if n == -1:
                return None
            encoding = "latin-1" if (flags >> 12) & _LATIN1_MASK else "utf-8"
            return self.read_bytes(n).decode(encoding, errors="replace")
        if kind == ALTREP_SXP:
            self.item()  # class info
            state = self.item()
            self.item()  # attributes
            return state
        raise DataError(f"Unsupported R object type {kind} in serialised data.")

    def vector(self, kind: int, has_attr: bool) -> Any:
        """A vector's values, then its attributes: a list with names becomes a dict."""
        out = self.values(kind)
        if has_attr:
            attrs = dict(self.item())
            element_names = attrs.get("names")
            if kind == VECSXP and isinstance(element_names, list) and len(element_names) == len(out):
                return dict(zip(element_names, out))  # a named list
        return out

    def values(self, kind: int) -> Any:
        if kind in (LGLSXP, INTSXP):
            n = self.length()
            values = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
            return [None if v == _NA_INT else v for v in values]
        if kind == REALSXP:
            n = self.length()
            reals = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
            return reals
        if kind == CPLXSXP:
            n = self.length()
            parts = struct.unpack_from(f">{2 * n}d", self.data, self.pos)
            self.pos += 16 * n
            return [complex(parts[2 * i], parts[2 * i + 1]) for i in range(n)]
        if kind == RAWSXP:
            return self.read_bytes(self.length())
        if kind == S4SXP:
            return None
        return [self.item() for _ in range(self.length())]  # STRSXP, VECSXP, EXPRSXP

    def pairlist(self, flags: int) -> list[tuple[Any, Any]]:
        """A pairlist (attributes, calls) as [(tag, value), ...]; read iteratively along its CDRs."""
        items = []
        while True:
            if flags & (1 << 9):
                self.item()  # attributes of the cell
            tag = self.item() if flags & (1 << 10) else None
            items.append((tag, self.item()))
            flags = self.read_int()
            if flags & 0xFF not in (LISTSXP, LANGSXP, ATTRLANGSXP, ATTRLISTSXP):
                self.pos -= 4
                self.item()  # the terminating CDR (normally NILVALUE)
                return items


def unserialize(data: bytes) -> Any:
    """One R object from its XDR serialisation (`X\\n` header, version 2 or 3)."""
    if data[:2] != b"X\n":
        raise DataError("Not an R XDR serialisation (expected 'X\\n' header).")
    reader = _Reader(data)
    reader.pos = 2
    version = reader.read_int()
    reader.read_int(), reader.read_int()  # writer's R version, minimal reader version
    if version == 3:
        reader.read_bytes(reader.read_int())  # native encoding name
    elif version != 2:
        raise DataError(f"Unsupported R serialisation version {version}.")
    return reader.item()


def _index(rdx_path: Path) -> dict[str, tuple[int, int]]:
    """`variables` of the index: object name -> (offset, length) in the .rdb file."""
    index = unserialize(gzip.decompress(rdx_path.read_bytes()))
    variables = index.get("variables") if isinstance(index, dict) else None
    if not isinstance(variables, dict):
        raise DataError(f"{rdx_path} is not an R lazy-load index (no named 'variables' list).")
    return {name: (int(pair[0]), int(pair[1])) for name, pair in variables.items()}


def _block(rdb: bytes, offset: int, length: int) -> bytes:
    block = rdb[offset : offset + length]
    size = struct.unpack_from(">I", block, 0)[0]
    body = block[4:]
    if body[:1] == b"2":
        data = bz2.decompress(body[1:])
    elif body[:1] == b"3":
        data = lzma.decompress(body[1:])
    elif body[:1] == b"0":
        data = body[1:]
    else:
        data = zlib.decompress(body)
    if len(data) != size:
        raise DataError("A lazy-load block has the wrong size (corrupt .rdb?).")
    return data


def read_lazyload_db(stem: str | Path) -> dict[str, Any]:
    """All objects of the lazy-load database `<stem>.rdx` / `<stem>.rdb`, by name."""
    stem = Path(stem)
    rdx, rdb_path = stem.with_suffix(".rdx"), stem.with_suffix(".rdb")
    try:
        index = _index(rdx)
        rdb = rdb_path.read_bytes()
    except (OSError, EOFError, zlib.error, struct.error) as exc:
        raise DataError(f"Cannot read the R lazy-load database {stem}: {exc}") from exc
    return {name: unserialize(_block(rdb, off, n)) for name, (off, n) in index.items()}
