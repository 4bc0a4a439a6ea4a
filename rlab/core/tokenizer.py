"""Byte-level BPE tokenizer in nanochat's on-disk format.

Training uses `rustbpe` (the trainer nanochat uses: fast, parallel, GPT-4-style pre-split);
running uses `tiktoken` (a fast, well-kept encoder that releases the GIL, so batch encoding
on threads overlaps with training compute). The saved form is exactly nanochat's, so a
user's existing tokenizer directory loads unchanged and ours loads in nanochat:

    <dir>/tokenizer.pkl     a pickled `tiktoken.Encoding` (merges + split pattern + specials)
    <dir>/token_bytes.pt    int32 tensor [vocab]: UTF-8 byte length of each token, 0 for specials

`token_bytes.pt` is what bits-per-byte needs: summing it over target tokens gives the bytes
those tokens stand for, with special tokens counting zero bytes.

Special tokens (nanochat's set) get the ids right after the merged tokens, in this order.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, overload

from rlab.core.torch_zip import StoredTensor, read_tensors
from rlab.errors import DataError

if TYPE_CHECKING:  # torch stays out of `rlab --help`
    import tiktoken
    import torch

log = logging.getLogger(__name__)

BOS = "<|bos|>"
# Below this many characters a list is encoded on the calling thread: tiktoken's batch call starts a
# fresh thread pool every time (about 7 ms on 2 cores), more than short texts take to encode.
_THREADED_MIN_CHARS = 200_000
SPECIAL_TOKENS: tuple[str, ...] = (
    BOS,  # starts every document; the loader packs documents as BOS doc BOS doc ...
    "<|user_start|>",
    "<|user_end|>",
    "<|assistant_start|>",
    "<|assistant_end|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|output_start|>",
    "<|output_end|>",
)

# GPT-4's (cl100k) pre-split regex, with numbers split into runs of at most 2 digits instead
# of 3: with the small vocabularies rlab trains (thousands, not 100k) 3-digit number tokens
# waste vocabulary on rare numbers. Contractions, letter runs, punctuation runs, newlines
# and whitespace are split exactly as GPT-4 does.
SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""

PICKLE_NAME = "tokenizer.pkl"
TOKEN_BYTES_NAME = "token_bytes.pt"

# The smallest vocabulary that makes sense: all 256 bytes plus the special tokens.
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)


class Tokenizer:
    """A tiktoken encoding plus nanochat's conventions (BOS, specials, save format)."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.enc = encoding
        try:
            self._bos_id = encoding.encode_single_token(BOS)
        except KeyError as exc:
            raise DataError(
                f"Tokenizer '{encoding.name}' has no {BOS} special token.",
                "rlab packs documents with nanochat's <|bos|>; rebuild it with `rlab data prepare --force`.",
            ) from exc

    # ----- construction -------------------------------------------------------------------

    @classmethod
    def from_directory(cls, directory: str | Path) -> Tokenizer:
        """Load `<directory>/tokenizer.pkl` (nanochat's format)."""
        path = Path(directory) / PICKLE_NAME
        if not path.is_file():
            raise DataError(
                f"No tokenizer at {path}.",
                "Build one with `rlab data prepare` (or point --base-dir at nanochat's dir).",
            )
        try:
            with open(path, "rb") as f:
                enc = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
            raise DataError(
                f"Cannot read tokenizer {path}: {exc}", "Rebuild it with `rlab data prepare --force`."
            ) from exc
        import tiktoken

        if not isinstance(enc, tiktoken.Encoding):
            raise DataError(f"{path} holds a {type(enc).__name__}, not a tiktoken.Encoding.")
        return cls(enc)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, name: str = "rlab") -> Tokenizer:
        """Train a byte-level BPE of `vocab_size` tokens in total (merges + 256 bytes + specials).

        A corpus too small to support that many merges yields a smaller vocabulary (logged).
        """
        if vocab_size < MIN_VOCAB_SIZE:
            raise DataError(
                f"Vocab size {vocab_size} is too small: it must be at least 256 bytes + {len(SPECIAL_TOKENS)} "
                f"special tokens = {MIN_VOCAB_SIZE}.",
                "Pass a larger --vocab-size (e.g. 4096).",
            )
        import rustbpe
        import tiktoken

        trainer = rustbpe.Tokenizer()
        n_plain = vocab_size - len(SPECIAL_TOKENS)
        t0 = time.perf_counter()
        trainer.train_from_iterator(iter(texts), n_plain, pattern=SPLIT_PATTERN)
        ranks = {token: rank for token, rank in trainer.get_mergeable_ranks()}
        log.info("trained BPE: %d tokens in %.2fs", len(ranks), time.perf_counter() - t0)
        if len(ranks) < n_plain:
            log.warning("corpus supports only %d of the %d requested plain tokens", len(ranks), n_plain)
        specials = {tok: len(ranks) + i for i, tok in enumerate(SPECIAL_TOKENS)}
        enc = tiktoken.Encoding(
            name=name, pat_str=SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens=specials
        )
        return cls(enc)

    def save(self, directory: str | Path) -> None:
        """Write `tokenizer.pkl` and `token_bytes.pt` (nanochat's format) into `directory`."""
        import torch

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / (PICKLE_NAME + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(self.enc, f)
        tmp.replace(directory / PICKLE_NAME)
        tmp = directory / (TOKEN_BYTES_NAME + ".tmp")
        with open(tmp, "wb") as f:
            torch.save(self.token_bytes(), f)
        tmp.replace(directory / TOKEN_BYTES_NAME)

    # ----- vocabulary ----------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.enc.n_vocab

    @property
    def bos_token_id(self) -> int:
        return self._bos_id

    @property
    def special_tokens(self) -> set[str]:
        return set(self.enc.special_tokens_set)

    def encode_special(self, name: str) -> int:
        """Id of a special token such as `<|bos|>`."""
        try:
            return self.enc.encode_single_token(name)
        except KeyError as exc:
            raise DataError(
                f"Unknown special token {name!r}; this tokenizer has {sorted(self.special_tokens)}."
            ) from exc

    def token_bytes(self) -> torch.Tensor:
        """int32 [vocab]: UTF-8 byte length of each token's bytes, 0 for special tokens."""
        import torch

        special_ids = {self.enc.encode_single_token(s) for s in self.enc.special_tokens_set}
        lengths = [
            0 if i in special_ids else len(self.enc.decode_single_token_bytes(i))
            for i in range(self.vocab_size)
        ]
        return torch.tensor(lengths, dtype=torch.int32)

    # ----- encode / decode -----------------------------------------------------------------

    def _as_id(self, token: int | str | None) -> int | None:
        if token is None or isinstance(token, int):
            return token
        return self.encode_special(token)

    @overload
    def encode(  # type: ignore[overload-overlap]  # a str is also a Sequence[str]; str wins
        self,
        text: str,
        prepend: int | str | None = None,
        append: int | str | None = None,
        num_threads: int = 8,
    ) -> list[int]: ...

    @overload
    def encode(
        self,
        text: Sequence[str],
        prepend: int | str | None = None,
        append: int | str | None = None,
        num_threads: int = 8,
    ) -> list[list[int]]: ...

    def encode(
        self,
        text: str | Sequence[str],
        prepend: int | str | None = None,
        append: int | str | None = None,
        num_threads: int = 8,
    ) -> list[int] | list[list[int]]:
        """Encode ordinary text (special-token strings in it are treated as plain text).

        `text` is one string -> list of ids, or a list of strings -> one list per string,
        encoded on `num_threads` threads. `prepend` / `append` are a token id or a special
        token name added to every sequence (e.g. `prepend="<|bos|>"`).
        """
        first, last = self._as_id(prepend), self._as_id(append)
        if isinstance(text, str):
            ids = self.enc.encode_ordinary(text)
            if first is not None:
                ids.insert(0, first)
            if last is not None:
                ids.append(last)
            return ids
        texts = list(text)
        if sum(map(len, texts)) < _THREADED_MIN_CHARS:  # a thread pool costs more than it saves here
            batch = [self.enc.encode_ordinary(t) for t in texts]
        else:
            batch = self.enc.encode_ordinary_batch(texts, num_threads=num_threads)
        if first is not None:
            batch = [[first, *ids] for ids in batch]
        if last is not None:
            for ids in batch:
                ids.append(last)
        return batch

    def decode(self, ids: Sequence[int] | Iterator[int]) -> str:
        return self.enc.decode(list(ids))

    def __repr__(self) -> str:
        return f"Tokenizer(name={self.enc.name!r}, vocab_size={self.vocab_size})"


def check_tokenizer(directory: str | Path) -> int:
    """Load the tokenizer and its token byte table as a worker will; its vocabulary size, or a `DataError`
    naming the file that cannot be read."""
    tokenizer = Tokenizer.from_directory(directory)
    path = Path(directory) / TOKEN_BYTES_NAME
    stored = read_tensors(path) if path.is_file() else None  # a plain file: read without torch
    try:
        entries = stored.numel if isinstance(stored, StoredTensor) else load_token_bytes(directory).numel()
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a truncated or foreign file
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"Cannot read {path}: {reason}.", "Rebuild it with `rlab data prepare --force`."
        ) from None
    if entries != tokenizer.vocab_size:
        raise DataError(
            f"{path} has {entries} entries for a tokenizer of {tokenizer.vocab_size} tokens.",
            "Rebuild it with `rlab data prepare --force`.",
        )
    return tokenizer.vocab_size


def load_token_bytes(directory: str | Path, device: str | torch.device = "cpu") -> torch.Tensor:
    """`<directory>/token_bytes.pt` as a LongTensor [vocab] on `device` (0 = special token)."""
    import torch

    path = Path(directory) / TOKEN_BYTES_NAME
    if not path.is_file():
        raise DataError(f"No token byte table at {path}.", "Build the tokenizer with `rlab data prepare`.")
    with open(path, "rb") as f:
        table = torch.load(f, map_location="cpu")
    return table.to(device=device, dtype=torch.long)
