"""rlab's tokenizer (a tiktoken `Encoding`, trained by rustbpe or nanochat) as a transformers-loadable one.

transformers' own `TikTokenConverter` rebuilds the BPE merges from tiktoken's ranks and sets the byte-level
pre-tokenizer with the same split pattern; rlab hands it the ranks in memory (it would otherwise read a
`.tiktoken` file) and checks the result: the special tokens keep their ids and every check text encodes to
the same ids. The saved tokenizer prepends `<|bos|>` (nanochat starts every document with it), so
`tokenizer(text)` gives what the model trained on; `add_special_tokens=False` leaves it out.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rlab.core.tokenizer import BOS, Tokenizer
from rlab.errors import ExportError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog. It's 12:45, isn't it?",
    "Numbers 1234567 and 3.14159; code: for i in range(10):\n\tprint(i ** 2)\n\n",
    "Ünïcödé, 日本語のテキスト, emoji 🙂 and\r\nWindows line ends   with  spaces.",
    "The pass key is 48213. Remember it. 48213 is the pass key.",
)
"""Texts whose ids must agree between rlab's tokenizer and the exported one (words, digits, code, unicode)."""


def hf_tokenizer(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    """The same BPE as a `PreTrainedTokenizerFast` (BOS prepended by its post-processor), checked."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    enc = tokenizer.enc
    ranks = enc._mergeable_ranks  # tiktoken keeps no public accessor for them
    specials = sorted(enc._special_tokens, key=enc._special_tokens.__getitem__)

    class _InMemory(TikTokenConverter):
        def load_tiktoken_bpe(self, tiktoken_url: str) -> dict[bytes, int]:  # type: ignore[override]
            return ranks

    converted = _InMemory(
        vocab_file="<in memory>", pattern=enc._pat_str, extra_special_tokens=specials
    ).converted()
    bos_id = tokenizer.bos_token_id
    converted.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
            ),
        ]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=converted, bos_token=BOS, eos_token=BOS)
    check_tokenizer(tokenizer, fast)
    return fast


def check_tokenizer(tokenizer: Tokenizer, fast: PreTrainedTokenizerFast) -> int:
    """`ExportError` unless special ids and `CHECK_TEXTS` agree; the number of texts checked."""
    enc = tokenizer.enc
    for name, token_id in enc._special_tokens.items():
        if fast.convert_tokens_to_ids(name) != token_id:
            raise ExportError(
                f"Tokenizer export: special token {name} has id {fast.convert_tokens_to_ids(name)} in "
                f"transformers but {token_id} in rlab."
            )
    for text in CHECK_TEXTS:
        ours = tokenizer.encode(text)
        theirs = fast(text, add_special_tokens=False)["input_ids"]
        if ours != theirs:
            raise ExportError(
                f"Tokenizer export: {text[:40]!r}... encodes to {len(theirs)} ids in transformers, "
                f"{len(ours)} in rlab (first difference at {_first_difference(ours, theirs)}).",
                "The split pattern may use syntax the tokenizers library reads differently.",
            )
        if fast(text)["input_ids"] != [tokenizer.bos_token_id, *ours]:
            raise ExportError("Tokenizer export: the saved tokenizer does not prepend <|bos|>.")
    return len(CHECK_TEXTS)


def save_hf_tokenizer(tokenizer: Tokenizer, out: Path, max_length: int | None = None) -> int:
    """Write tokenizer.json (+ tokenizer_config.json) into `out`; returns the vocabulary size. Batches pad on the
    left with <|bos|> (masked out), so `generate` on several prompts works as written; `model_max_length` is the
    length the model serves."""
    fast = hf_tokenizer(tokenizer)
    fast.pad_token = BOS
    fast.padding_side = "left"
    if max_length is not None:
        fast.model_max_length = max_length
    fast.save_pretrained(str(out))
    return len(fast)


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
