"""Passkey retrieval: can the model find a number hidden at a given depth of a long prompt?

A prompt of (at most) `length` tokens is built from: BOS, an instruction, repeated filler
sentences with a "needle" sentence carrying a random 5-digit key inserted after a fraction
`depth` of the filler, and a question whose natural continuation is the key. The model decodes
a few tokens greedily (through the KV-cache `Engine`); the trial is correct when the first
number in its output equals the key. Accuracy is reported per (length, depth) over `trials`
seeded trials; trial t uses the key drawn by `random.Random(seed + t)`, so every cell and every
variant sees the same keys.

Prompts are assembled at the token level (filler in whole sentences), so the length and the
needle's position are exact rather than estimated from characters.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rlab.errors import EvalError

log = logging.getLogger(__name__)

INSTRUCTION = "Remember the secret number hidden in this text.\n"
FILLER = "The river runs to the sea. The hills stay where they are. Birds cross the sky and the day goes on. "
NEEDLE = "The secret number is {key}. "
QUESTION = "\nWhat is the secret number? It is"


@dataclass(frozen=True)
class PasskeyPrompt:
    tokens: list[int]
    key: str
    needle_start: int
    """Token index where the needle sentence starts."""
    filler_start: int
    filler_end: int
    """Token range [filler_start, filler_end) holding filler plus the needle."""


def draw_key(seed: int, trial: int) -> str:
    return str(random.Random(seed + trial).randint(10000, 99999))


def build_prompt(tokenizer, length: int, depth: float, key: str) -> PasskeyPrompt:
    """A prompt of at most `length` tokens with the needle after `depth` of the filler sentences."""
    if not 0.0 <= depth <= 1.0:
        raise EvalError(f"Passkey depth must be within [0, 1] (got {depth}).")
    head = [tokenizer.bos_token_id, *tokenizer.encode(INSTRUCTION)]
    needle = tokenizer.encode(NEEDLE.format(key=key))
    question = tokenizer.encode(QUESTION)
    unit = tokenizer.encode(FILLER)
    room = length - len(head) - len(needle) - len(question)
    if room < 0:
        raise EvalError(
            f"Passkey length {length} is too short: instruction, needle and question alone take "
            f"{length - room} tokens.",
            "Use longer passkey_lengths.",
        )
    n_units = room // len(unit)
    before = int(round(depth * n_units))
    tokens = head + unit * before
    needle_start = len(tokens)
    tokens += needle + unit * (n_units - before)
    filler_end = len(tokens)
    tokens += question
    return PasskeyPrompt(tokens, key, needle_start, len(head), filler_end)


def first_number(text: str) -> str | None:
    m = re.search(r"\d+", text)
    return m.group(0) if m else None


@dataclass
class PasskeyResult:
    lengths: list[int]
    depths: list[float]
    trials: int
    correct: dict[tuple[int, float], int]
    skipped: list[dict]

    def cells(self) -> list[dict]:
        return [
            {"length": L, "depth": d, "accuracy": self.correct[(L, d)] / self.trials, "n": self.trials}
            for L in self.lengths
            for d in self.depths
        ]

    def metrics(self) -> dict:
        cells = self.cells()
        overall = sum(c["accuracy"] for c in cells) / len(cells) if cells else float("nan")
        return {
            "lengths": self.lengths,
            "depths": self.depths,
            "trials": self.trials,
            "overall": overall,
            "cells": cells,
            "skipped": self.skipped,
        }


def evaluate_passkey(
    engine,
    tokenizer,
    lengths: Sequence[int],
    depths: Sequence[float],
    trials: int,
    seed: int,
    device,
) -> PasskeyResult:
    """Accuracy per (length, depth); ranks take trials i = rank (mod world) and counts are summed."""
    import torch
    import torch.distributed as dist

    distributed = dist.is_available() and dist.is_initialized()
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    usable: list[int] = []
    skipped: list[dict] = []
    for L in lengths:
        try:
            build_prompt(tokenizer, L, 0.0, draw_key(seed, 0))
            usable.append(int(L))
        except EvalError as exc:
            log.warning("passkey length %d skipped: %s", L, exc.message)
            skipped.append({"length": int(L), "reason": exc.message})
    jobs = [(L, float(d), t) for L in usable for d in depths for t in range(trials)]
    hits = torch.zeros(len(jobs), dtype=torch.float32, device=device)
    for j in range(rank, len(jobs), world):
        L, d, t = jobs[j]
        prompt = build_prompt(tokenizer, L, d, draw_key(seed, t))
        answer_len = len(tokenizer.encode(" " + prompt.key)) + 2
        out = engine.generate(prompt.tokens, num_samples=1, max_tokens=answer_len, temperature=0.0)[0]
        hits[j] = float(first_number(tokenizer.decode(out)) == prompt.key)
    if distributed and world > 1:
        dist.all_reduce(hits, op=dist.ReduceOp.SUM)
    correct = {(L, float(d)): 0 for L in usable for d in depths}
    for (L, d, _), h in zip(jobs, hits.tolist()):
        correct[(L, d)] += int(h)
    result = PasskeyResult(list(usable), [float(d) for d in depths], trials, correct, skipped)
    log.info("passkey overall accuracy %.3f", result.metrics()["overall"])
    return result
