"""The export's check of itself: the staged folder loaded back (offline) must compute what rlab computes.

Two checks, both before anything is put in place: logits on a fixed batch (largest |difference| below
`ROUNDTRIP_TOLERANCE`; the batch runs past L0 where the model's length allows, so length-dependent RoPEs are
checked on their extended frequencies), and `generate()` as users and harnesses call it (greedy, KV cache on,
a batch of prompts of different lengths, left-padded) token for token against rlab's own greedy sampler
(`rlab.core.engine.Engine`, each prompt alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlab.core.engine import Engine
from rlab.errors import ExportError
from rlab.export.hf_tokenizer import check_tokenizer

ROUNDTRIP_TOLERANCE = 1e-3
"""Largest |logit difference| (logits soft-capped at 15, float32) allowed between rlab and the exported model.
transformers' own NanoChat forms rotary angles in float32 (position x inv_freq), rlab in float64; that and the
order of float32 sums are the differences (measured: <= 2e-5 on the test models, see tests/export)."""
ROUNDTRIP_ROWS = 2
ROUNDTRIP_MIN_LEN = 128
ROUNDTRIP_PAST_L0 = 64
"""The check batch: 2 rows of min(sequence_len, max(128, L0 + 64)) tokens, BOS first, seeded."""
GENERATE_NEW_TOKENS = 8
"""generate() check: 3 prompts (the check length minus these new tokens, half of it, 5 tokens), left-padded."""


@dataclass(frozen=True)
class RoundTrip:
    """The export's own check: rlab's logits vs the loaded folder's on one fixed batch, and greedy generation."""

    max_abs_logit_diff: float
    rows: int
    length: int
    original_len: int
    tolerance: float
    argmax_agreement: float
    tokenizer_texts: int
    generate_rows: int = 0
    generate_new_tokens: int = 0
    generate_prompt_lens: tuple[int, ...] = ()
    generate_match: bool = False

    def describe(self) -> str:
        return (
            f"max |logit difference| {self.max_abs_logit_diff:.2e} over {self.rows}x{self.length} tokens "
            f"(L0 {self.original_len}; tolerance {self.tolerance:g}); argmax agrees at "
            f"{self.argmax_agreement:.1%} of positions; generate() (greedy, KV cache, left-padded prompts of "
            f"{', '.join(map(str, self.generate_prompt_lens))} tokens, {self.generate_new_tokens} new) "
            f"{'equals' if self.generate_match else 'differs from'} rlab's greedy sampler token for token; "
            f"tokenizer: {self.tokenizer_texts} check texts encode identically"
        )


def roundtrip_batch(model: Any, bos_id: int, seed: int = 0) -> Any:
    """(rows, length) token ids: BOS, then seeded tokens of the real vocabulary."""
    import torch

    c = model.config
    length = min(c.sequence_len, max(ROUNDTRIP_MIN_LEN, int(model.rope.original_len) + ROUNDTRIP_PAST_L0))
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, c.vocab_size, (ROUNDTRIP_ROWS, length), generator=generator)
    ids[:, 0] = bos_id
    return ids


def load_exported(folder: Path, remote: bool) -> Any:
    """The folder as transformers loads it (offline, float32); `ExportError` on keys it does not take."""
    import torch
    from transformers import AutoModelForCausalLM

    loaded: Any
    info: dict[str, Any]
    loaded, info = AutoModelForCausalLM.from_pretrained(  # type: ignore[misc]
        str(folder),
        trust_remote_code=remote,
        local_files_only=True,
        dtype=torch.float32,
        output_loading_info=True,
    )
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        raise ExportError(f"transformers loads the exported weights with {bad}.")
    return loaded.eval()


def check_roundtrip(model: Any, tokenizer: Any, folder: Path, remote: bool) -> RoundTrip:
    """Load `folder` back (tokenizer and model), compare logits on `roundtrip_batch` and greedy generation;
    `ExportError` past tolerance or on the first differing token."""
    from transformers import AutoTokenizer

    hf_tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=remote)
    tokenizer_texts = check_tokenizer(tokenizer, hf_tok)  # type: ignore[arg-type]
    bos = int(hf_tok.bos_token_id)
    ids = roundtrip_batch(model, bos)
    loaded = load_exported(folder, remote)
    ours = model(ids)  # (B, T, V) fp32, soft-capped
    theirs = loaded(input_ids=ids).logits.float()  # (B, T, V)
    if theirs.shape != ours.shape:
        raise ExportError(
            f"Round trip: transformers gives logits {tuple(theirs.shape)}, rlab {tuple(ours.shape)}."
        )
    diff = float((theirs - ours).abs().max())
    prompts = [ids[0, :n].tolist() for n in generate_prompt_lengths(ids.size(1))]
    ours_new, theirs_new = greedy_rlab(model, prompts, bos), greedy_hf(loaded, prompts, bos)
    result = RoundTrip(
        max_abs_logit_diff=diff,
        rows=ids.size(0),
        length=ids.size(1),
        original_len=int(model.rope.original_len),
        tolerance=ROUNDTRIP_TOLERANCE,
        argmax_agreement=float((theirs.argmax(-1) == ours.argmax(-1)).float().mean()),
        tokenizer_texts=tokenizer_texts,
        generate_rows=len(prompts),
        generate_new_tokens=GENERATE_NEW_TOKENS,
        generate_prompt_lens=tuple(len(p) for p in prompts),
        generate_match=ours_new == theirs_new,
    )
    if not diff <= ROUNDTRIP_TOLERANCE or not result.generate_match:  # the first also catches NaN
        raise ExportError(
            f"Round trip failed: {result.describe()}."
            + ("" if result.generate_match else f" rlab generated {ours_new}, transformers {theirs_new}."),
            "Nothing was written. This is a bug in the export of this configuration; please report it.",
        )
    return result


def generate_prompt_lengths(length: int) -> list[int]:
    """Prompt lengths for the generate() check: the longest that fits the check length, half, and 5."""
    longest = max(length - GENERATE_NEW_TOKENS, 2)
    return [longest, max(longest // 2, 2), min(5, longest)]


def greedy_rlab(model: Any, prompts: list[list[int]], stop: int) -> list[list[int]]:
    """rlab's greedy sampler on each prompt alone (a row ends at `stop`, kept)."""

    engine = Engine(model, name="export check")
    return [
        engine.generate(p, max_tokens=GENERATE_NEW_TOKENS, temperature=0.0, stop_tokens=[stop])[0]
        for p in prompts
    ]


def greedy_hf(loaded: Any, prompts: list[list[int]], stop: int) -> list[list[int]]:
    """transformers' `generate` on the prompts as one left-padded batch, cache on; each row cut after `stop`."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[stop] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = loaded.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=GENERATE_NEW_TOKENS,
        do_sample=False,
        use_cache=True,
        eos_token_id=stop,
        pad_token_id=stop,
    )
    rows = []
    for row in out[:, width:].tolist():
        rows.append(row[: row.index(stop) + 1] if stop in row else row)
    return rows
