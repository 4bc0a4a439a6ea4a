"""Tokenizer: round trips, special tokens, token_bytes, nanochat's save format."""

from __future__ import annotations

import pickle

import pytest
import tiktoken
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlab.core.tokenizer import (
    BOS,
    MIN_VOCAB_SIZE,
    SPECIAL_TOKENS,
    SPLIT_PATTERN,
    Tokenizer,
    load_token_bytes,
)
from rlab.errors import DataError
from tests.conftest import TINY_VOCAB_SIZE, make_english_docs

SAMPLES = [
    "",
    "Hello, world!",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune...",
    "naïve café — déjà vu; Grüße aus Köln; ñandú",
    "日本語のテキストと中文文本 and 한국어",
    "emoji 🙂🚀👩‍👩‍👧 and math ∑∫√∞ ≠ ≤",
    "tabs\tand\nnewlines\r\n and   runs of    spaces\n\n\n",
    "numbers 1234567890 3.14159 -42 1e-9",
    "<|bos|> looks special but is plain text here",
    "\x00\x01 control chars \u200b zero-width",
]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.train(make_english_docs(60, seed=3), 400)


def test_train_gives_requested_vocab_with_specials_last(tokenizer):
    assert tokenizer.vocab_size == 400
    ids = [tokenizer.encode_special(s) for s in SPECIAL_TOKENS]
    assert ids == list(range(400 - len(SPECIAL_TOKENS), 400))
    assert tokenizer.bos_token_id == tokenizer.encode_special(BOS) == ids[0]
    assert tokenizer.enc._pat_str == SPLIT_PATTERN


@pytest.mark.parametrize("text", SAMPLES)
def test_round_trip_fixed_samples(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_round_trip_any_unicode(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_special_strings_in_text_are_not_special(tokenizer):
    ids = tokenizer.encode("<|bos|>")
    assert tokenizer.bos_token_id not in ids


def test_batch_encode_prepend_append_matches_single(tokenizer):
    batch = tokenizer.encode(SAMPLES, prepend=BOS, append="<|assistant_end|>", num_threads=2)
    end = tokenizer.encode_special("<|assistant_end|>")
    for text, ids in zip(SAMPLES, batch):
        assert ids[0] == tokenizer.bos_token_id and ids[-1] == end
        assert ids[1:-1] == tokenizer.encode(text)
    assert tokenizer.encode("abc", prepend=tokenizer.bos_token_id)[0] == tokenizer.bos_token_id


def test_token_bytes_are_utf8_lengths_and_zero_for_specials(tokenizer):
    table = tokenizer.token_bytes()
    assert table.shape == (tokenizer.vocab_size,) and table.dtype == torch.int32
    specials = {tokenizer.encode_special(s) for s in SPECIAL_TOKENS}
    for i in range(tokenizer.vocab_size):
        expected = 0 if i in specials else len(tokenizer.enc.decode_single_token_bytes(i))
        assert table[i].item() == expected
    assert (table[:256] == 1).all()  # the byte tokens
    # Summing the table over a text's tokens gives its UTF-8 byte count (what BPB divides by).
    text = SAMPLES[3] + SAMPLES[5]
    assert table[tokenizer.encode(text)].sum().item() == len(text.encode("utf-8"))


def test_save_and_reload_in_nanochat_format(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    with open(tmp_path / "tokenizer.pkl", "rb") as f:
        enc = pickle.load(f)  # nanochat reads exactly this
    assert isinstance(enc, tiktoken.Encoding)
    loaded = Tokenizer.from_directory(tmp_path)
    assert loaded.vocab_size == tokenizer.vocab_size
    for text in SAMPLES:
        assert loaded.encode(text) == tokenizer.encode(text)
    assert torch.equal(load_token_bytes(tmp_path), tokenizer.token_bytes().long())
    assert load_token_bytes(tmp_path).dtype == torch.long


def test_loads_a_tokenizer_dir_written_the_nanochat_way(tmp_path):
    """A directory holding only a pickled tiktoken.Encoding with nanochat's specials loads unchanged."""
    ranks = {bytes([i]): i for i in range(256)}
    ranks[b"th"] = 256
    specials = {s: 257 + i for i, s in enumerate(SPECIAL_TOKENS)}
    enc = tiktoken.Encoding(
        name="rustbpe", pat_str=SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens=specials
    )
    (tmp_path / "tokenizer.pkl").write_bytes(pickle.dumps(enc))
    tok = Tokenizer.from_directory(tmp_path)
    assert tok.bos_token_id == 257 and tok.vocab_size == 266
    assert tok.encode("the") == [256, ord("e")]


def test_bad_inputs_raise_data_errors(tmp_path):
    with pytest.raises(DataError, match=f"at least 256 bytes \\+ {len(SPECIAL_TOKENS)} special tokens"):
        Tokenizer.train(["some text"], MIN_VOCAB_SIZE - 1)
    with pytest.raises(DataError, match="No tokenizer"):
        Tokenizer.from_directory(tmp_path)
    (tmp_path / "tokenizer.pkl").write_bytes(b"not a pickle")
    with pytest.raises(DataError, match="Cannot read tokenizer"):
        Tokenizer.from_directory(tmp_path)
    with pytest.raises(DataError, match="No token byte table"):
        load_token_bytes(tmp_path)


def test_unknown_special_token(tokenizer):
    with pytest.raises(DataError, match="Unknown special token"):
        tokenizer.encode_special("<|nope|>")


def test_fixture_tokenizer(tiny_base_dir):
    tok = Tokenizer.from_directory(tiny_base_dir / "tokenizer")
    assert tok.vocab_size == TINY_VOCAB_SIZE
    assert load_token_bytes(tiny_base_dir / "tokenizer").shape == (TINY_VOCAB_SIZE,)
