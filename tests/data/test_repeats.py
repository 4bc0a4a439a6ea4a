"""Copy records in training text: every inserted passage is a verbatim copy of earlier text; seeded."""

from __future__ import annotations

import random

import pytest

from rlab.data.repeats import RepeatOptions, insert_repeats, with_repeats
from tests.conftest import make_english_docs


def test_repeats_are_verbatim_earlier_text_and_the_original_survives():
    words = [f"w{i}" for i in range(3000)]  # unique words: an insertion is easy to tell from the original
    out = insert_repeats(
        " ".join(words), random.Random(0), RepeatOptions(mean_gap=64, max_distance=256)
    ).split()
    i, j, inserted = 0, 0, []
    while j < len(out):
        if i < len(words) and out[j] == words[i]:
            i, j = i + 1, j + 1
            continue
        k = j
        while k < len(out) and (i >= len(words) or out[k] != words[i]):
            k += 1
        inserted.append((j, out[j:k]))
        j = k
    assert i == len(words)  # the original text is all there, in order
    assert len(inserted) > 20
    for at, passage in inserted:  # each insertion is a contiguous run of earlier output
        assert f" {' '.join(passage)} " in f" {' '.join(out[:at])} "


def test_seeded_and_validated():
    docs = make_english_docs(3, seed=5, min_sentences=80, max_sentences=80)
    assert with_repeats(docs, RepeatOptions(seed=1)) == with_repeats(docs, RepeatOptions(seed=1))
    assert with_repeats(docs, RepeatOptions(seed=1)) != with_repeats(docs, RepeatOptions(seed=2))
    with pytest.raises(ValueError, match="distances"):
        RepeatOptions(min_distance=10, max_distance=5)


def test_copy_documents_repeat_random_word_passages_and_are_interleaved():
    docs = make_english_docs(4, seed=6, min_sentences=80, max_sentences=80)
    opts = RepeatOptions(record_fraction=0.5, record_tokens=256)
    out = with_repeats(docs, opts)
    natural = [o for o in out if any(o.startswith(d.split()[0]) and d.split()[1] in o[:80] for d in docs)]
    records = [o for o in out if o not in natural]
    assert records and out.index(records[0]) < out.index(natural[-1])  # interleaved, not all at the end
    assert 0.3 < sum(map(len, records)) / sum(map(len, docs)) < 0.9
    for doc in records:
        for line in doc.split("\n"):  # each line: a span written twice in a row
            tokens = line.split()
            half = len(tokens) // 2
            assert len(tokens) == 2 * half and half >= 2 and tokens[:half] == tokens[half:], line


def test_copy_document_spans_follow_the_span_options():
    docs = make_english_docs(2, seed=7, min_sentences=80, max_sentences=80)
    opts = RepeatOptions(
        record_fraction=1.0, record_tokens=256, min_span=4, max_span=8, record_words=16, natural_spans=0.0
    )
    records = [o for o in with_repeats(docs, opts) if not any(o.startswith(d[:40]) for d in docs)]
    assert len(records) >= 4
    vocab = {w for line in "\n".join(records).split("\n") for w in line.split()}
    assert len(vocab) <= 16  # random words only, from the 16 most frequent
    halves = [len(line.split()) // 2 for doc in records for line in doc.split("\n")]
    assert max(halves) <= 8 / 1.5 + 1  # ~1.5 tokens a word: spans of at most 8 tokens
    with pytest.raises(ValueError, match="span"):
        RepeatOptions(min_span=9, max_span=8)
    with pytest.raises(ValueError, match="natural_spans"):
        RepeatOptions(natural_spans=1.5)
