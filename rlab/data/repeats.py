"""Long-range structure for the demo's training text: passages repeated verbatim at a distance.

A tiny model trained for a minute on natural text barely uses context beyond a few dozen tokens,
so nothing it does at long context can be measured. Natural text with occasional verbatim
repeats fixes that: the model learns quickly to look back and copy (an induction head), and
whether it still can at distance d, in a window of length L, under a RoPE variant, is what
context extension is about.

`insert_repeats` walks a document and, every `gap` tokens or so, inserts a copy of a passage
(16-128 tokens) that ended `d` tokens earlier in the output, with `d` log-uniform between
`min_distance` and `max_distance`. The document stays natural text between repeats; the
repeats are mixed into the very shards the trainer reads. `copy_document` adds documents made
only of short spans written twice (`S S`), where copying is learned fastest. Lengths are in tokens, converted to
characters with `chars_per_token` and cut at whitespace, so the text is tokenizer-independent
(the eval, `rlab.evals.copy_distance.task`, builds its own documents with exact token distances).
Everything is drawn from one `random.Random(seed)`: the same texts and seed give the same output.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RepeatOptions:
    """How often, how long and how far back the inserted repeats are (lengths in tokens)."""

    min_passage: int = 16
    max_passage: int = 128
    min_distance: int = 16
    max_distance: int = 1024
    """Distances are log-uniform up to here: a base trained at L0 learns from those <= L0, a
    continuation at 4x L0 from the rest."""
    mean_gap: int = 256
    """Natural tokens between two repeats, on average (uniform in [gap/4, 7*gap/4])."""
    record_fraction: float = 2.0
    """Copy documents added, in characters per character of natural text (0 = none; see `copy_document`):
    2 makes about a third of the training tokens predictable only by copying."""
    record_tokens: int = 1024
    """Length of one copy document, in tokens (approx.)."""
    min_span: int = 4
    max_span: int = 16
    """Copy-document spans are log-uniform in [min_span, max_span] tokens (a span's copy is that far back).
    Short, so that both copies fit in the 32- and 64-token rows of a sequence-length warmup, where a small
    model learns to copy fastest; longer distances are the natural documents' repeats. (Spans of 4-64 or
    16-1024 tokens put almost no copies inside a 32-token row: the demo's base then did not learn to copy.)"""
    record_words: int = 2000
    """Random-word spans draw words uniformly from this many most frequent words of the corpus."""
    natural_spans: float = 0.5
    """Share of copy-document spans that are natural text instead of random words."""
    chars_per_token: float = 3.7
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.min_passage <= self.max_passage:
            raise ValueError(
                f"passage lengths must satisfy 0 < min <= max (got {self.min_passage}, {self.max_passage})"
            )
        if not 0 < self.min_distance <= self.max_distance:
            raise ValueError(
                f"distances must satisfy 0 < min <= max (got {self.min_distance}, {self.max_distance})"
            )
        if not 0 < self.min_span <= self.max_span:
            raise ValueError(
                f"span lengths must satisfy 0 < min <= max (got {self.min_span}, {self.max_span})"
            )
        if not 0 <= self.record_fraction or self.record_tokens < 1 or self.record_words < 1:
            raise ValueError("record_fraction must be >= 0, record_tokens and record_words >= 1")
        if not 0 <= self.natural_spans <= 1:
            raise ValueError(f"natural_spans must be in [0, 1] (got {self.natural_spans})")
        if self.mean_gap < 4 or self.chars_per_token <= 0:
            raise ValueError("mean_gap must be >= 4 and chars_per_token > 0")


_WORD = re.compile(r"[a-z]{3,}")


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _word_start(text: str, i: int) -> int:
    """The first word start at or after `i` (len(text) if none)."""
    if i <= 0:
        return 0
    while i < len(text) and not text[i - 1].isspace():
        i += 1
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _word_end(text: str, i: int) -> int:
    """The end of the word that contains position `i` (so a cut never splits a word)."""
    while i < len(text) and not text[i].isspace():
        i += 1
    return i


def insert_repeats(text: str, rng: random.Random, opts: RepeatOptions) -> str:
    """`text` with verbatim repeats of earlier passages inserted every ~`mean_gap` tokens."""
    cpt = opts.chars_per_token
    out: list[str] = []
    window = ""  # the tail of the output, long enough to copy from max_distance back
    keep = int((opts.max_distance + opts.max_passage) * cpt) + 64
    produced = 0  # characters of output so far
    pos = 0
    while pos < len(text):
        gap_chars = int(rng.uniform(0.25, 1.75) * opts.mean_gap * cpt)
        cut = _word_end(text, min(len(text), pos + gap_chars))
        chunk = text[pos:cut]
        out.append(chunk)
        window = (window + chunk)[-keep:]
        produced += len(chunk)
        pos = cut
        if pos >= len(text):
            break
        passage_chars = int(_log_uniform(rng, opts.min_passage, opts.max_passage) * cpt)
        distance_chars = int(_log_uniform(rng, opts.min_distance, opts.max_distance) * cpt)
        distance_chars = max(distance_chars, passage_chars + 1)
        if distance_chars > produced:
            continue  # not enough text behind us yet
        start = len(window) - distance_chars
        begin = _word_start(window, start)
        end = _word_end(window, min(len(window), begin + passage_chars))
        passage = window[begin:end].strip()
        if not passage:
            continue
        inserted = " " + passage
        out.append(inserted)
        window = (window + inserted)[-keep:]
        produced += len(inserted)
    return "".join(out)


def frequent_words(texts: Sequence[str], n: int) -> list[str]:
    """The `n` most frequent lower-case alphabetic words (3+ letters) of `texts`, most frequent first."""
    counts = Counter(w for t in texts for w in _WORD.findall(t.lower()))
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def copy_document(rng: random.Random, words: Sequence[str], filler: str, opts: RepeatOptions) -> str:
    """One copy document: spans of text, each written twice in a row (`S S`), one span a line.

    A span is `d` tokens long, d log-uniform in [min_span, max_span], so every token of the second
    copy is predictable from the token `d` back, and half the document is such copies. Spans are
    random words (predictable *only* by looking back: the clearest signal there is for learning to
    copy), a `natural_spans` share of them natural text from `filler`. Longer distances are in the
    natural documents' repeats (`insert_repeats`, up to `max_distance`).
    """
    cpt = opts.chars_per_token
    lines: list[str] = []
    produced, limit = 0, int(opts.record_tokens * cpt)
    while produced < limit:
        span_chars = int(_log_uniform(rng, opts.min_span, opts.max_span) * cpt)
        if rng.random() < 1.0 - opts.natural_spans:
            n_words = max(2, int(span_chars / cpt / 1.5))  # ~1.5 tokens a word
            span = " ".join(rng.choice(words) for _ in range(n_words))
        else:
            start = _word_start(filler, rng.randrange(max(1, len(filler) - span_chars)))
            span = " ".join(filler[start : _word_end(filler, min(len(filler), start + span_chars))].split())
        if span:
            lines.append(f"{span} {span}")
            produced += 2 * len(span) + 2
    return "\n".join(lines)


def with_repeats(texts: Sequence[str], opts: RepeatOptions) -> list[str]:
    """Every document of `texts` with repeats inserted, and copy documents interleaved among them
    (about `record_fraction` of the natural characters); deterministic from `opts.seed`."""
    rng = random.Random(opts.seed)
    out: list[str] = []
    words = frequent_words(texts, opts.record_words) if opts.record_fraction > 0 else []
    budget = 0.0
    for text in texts:
        out.append(insert_repeats(text, rng, opts))
        budget += opts.record_fraction * len(text)
        while words and budget > 0:
            doc = copy_document(rng, words, text, opts)
            out.append(doc)
            budget -= len(doc)
    return out
