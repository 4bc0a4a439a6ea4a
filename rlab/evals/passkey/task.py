"""Passkey retrieval: can the model find a number hidden at a given depth of a long prompt?

Protocol (after the YaRN repository's `eval/passkey.py`, itself from landmark attention):
a prompt of exactly `length` tokens: BOS, an instruction, repeated filler sentences, a needle
that states a random key twice ("The secret number is K. Remember it: K is the secret number."),
more filler, and a question whose natural continuation is the key. Keys are integers in
1..50000 (YaRN's range). The model decodes 10 tokens greedily (YaRN's max_new_tokens); a trial
is correct when the first number in its output equals the key.

Differences from YaRN's script, on purpose: the depth is a grid (`eval.passkey_depths`, the fraction
of the filler placed before the needle, at most 0.9 so that filler always separates the key from
the question) instead of uniform at random, so accuracy can be read by depth; every (length, depth,
trial) cell draws its own key (independent units: a trial's key is not reused across cells);
prompts are assembled at the token level, so the length and the needle's position are exact.

Results: accuracy with its counts per (length, depth) cell, per length (all depths pooled:
n = depths x trials independent keys) and overall; every trial is one row of passkey_trials.csv
(its unit: length, depth, trial, key, correct), from which the report computes intervals (Wilson).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rlab.errors import EvalError
from rlab.evals.retrieval.generation import Generation, GenJob, run_jobs_with_choices, stable_seed
from rlab.evals.retrieval.likelihood import ChoiceScore, make_item

if TYPE_CHECKING:
    from rlab.core.tokenizer import Tokenizer

log = logging.getLogger(__name__)

INSTRUCTION = (
    "A secret number is hidden somewhere in the long text below. Find it and remember it: "
    "you will be asked for it at the end.\n"
)
FILLER = "The river runs to the sea. The hills stay where they are. Birds cross the sky and the day goes on. "
NEEDLE = "The secret number is {key}. Remember it: {key} is the secret number. "
QUESTION = "\nWhat is the secret number? The secret number is"
KEY_MIN, KEY_MAX = 1, 50000
MAX_NEW_TOKENS = 10
SOURCE = (
    "github.com/jquesnelle/yarn eval/passkey.py (key range, key stated twice, greedy, first number scored)"
)


@dataclass(frozen=True)
class PasskeyPrompt:
    tokens: list[int]
    key: str
    needle_start: int
    """Token index where the needle sentence starts."""
    filler_start: int
    filler_end: int
    """Token range [filler_start, filler_end) holding filler plus the needle."""


def draw_key(seed: int, length: int, depth: float, trial: int) -> str:
    """The key of one (length, depth, trial) cell: independent of every other cell, the same for every variant."""
    return str(random.Random(stable_seed("passkey", seed, length, depth, trial)).randint(KEY_MIN, KEY_MAX))


def shortest_prompt(tokenizer: Tokenizer) -> int:
    """Tokens of the shortest passkey prompt this tokenizer makes (instruction, needle, question, one filler)."""
    needle = tokenizer.encode(NEEDLE.format(key=str(KEY_MAX)))
    fixed = 1 + len(tokenizer.encode(INSTRUCTION)) + len(needle) + len(tokenizer.encode(QUESTION))
    return fixed + len(tokenizer.encode(FILLER))


def build_prompt(tokenizer: Tokenizer, length: int, depth: float, key: str) -> PasskeyPrompt:
    """A prompt of exactly `length` tokens with the needle after `depth` of the filler sentences.

    The filler is whole sentences plus, right after the instruction, the tail of one sentence that
    makes the length exact.
    """
    if not 0.0 <= depth <= 1.0:
        raise EvalError(f"Passkey depth must be within [0, 1] (got {depth}).")
    head = [tokenizer.bos_token_id, *tokenizer.encode(INSTRUCTION)]
    needle = tokenizer.encode(NEEDLE.format(key=key))
    question = tokenizer.encode(QUESTION)
    unit = tokenizer.encode(FILLER)
    room = length - len(head) - len(needle) - len(question)
    if room < len(unit):
        raise EvalError(
            f"Passkey length {length} is too short: instruction, needle, question and one filler sentence "
            f"take {length - room + len(unit)} tokens.",
            "Use longer passkey_lengths.",
        )
    n_units, extra = divmod(room, len(unit))
    before = int(round(depth * n_units))
    tokens = head + (unit[len(unit) - extra :] if extra else []) + unit * before
    needle_start = len(tokens)
    tokens += needle + unit * (n_units - before)
    filler_end = len(tokens)
    tokens += question
    return PasskeyPrompt(tokens, key, needle_start, len(head), filler_end)


def first_number(text: str) -> str | None:
    m = re.search(r"\d+", text)
    return m.group(0) if m else None


@dataclass(frozen=True)
class PasskeyTrial:
    length: int
    depth: float
    trial: int
    key: str
    correct: bool


@dataclass
class PasskeyResult:
    lengths: list[int]
    depths: list[float]
    trials: int
    records: list[PasskeyTrial]
    skipped: list[dict]
    choices: list[ChoiceScore] = field(default_factory=list)
    """The same trials scored by likelihood (`rlab.evals.retrieval.likelihood`), in the order of `records`;
    empty when no choices were asked for."""

    @staticmethod
    def _summary(rows: Sequence[PasskeyTrial]) -> dict:
        n, k = len(rows), sum(r.correct for r in rows)
        return {"accuracy": k / n if n else float("nan"), "correct": k, "n": n}

    def cells(self) -> list[dict]:
        return [
            {
                "length": L,
                "depth": d,
                **self._summary([r for r in self.records if r.length == L and r.depth == d]),
            }
            for L in self.lengths
            for d in self.depths
        ]

    def by_length(self) -> list[dict]:
        return [
            {"length": L, **self._summary([r for r in self.records if r.length == L])} for L in self.lengths
        ]

    def metrics(self) -> dict:
        overall = self._summary(self.records)
        return {
            "protocol": (
                f"{SOURCE}; keys {KEY_MIN}-{KEY_MAX}, one per (length, depth, trial); prompt of exactly "
                f"`length` tokens; depth = fraction of the filler before the needle; {MAX_NEW_TOKENS} "
                "greedy tokens; correct = first number equals the key; intervals: the report's, from the "
                "independent keys (passkey_trials.csv)"
            ),
            "lengths": self.lengths,
            "depths": self.depths,
            "trials": self.trials,
            "units": len(self.records),
            "overall": overall["accuracy"],
            "by_length": self.by_length(),
            "cells": self.cells(),
            "skipped": self.skipped,
        }


def evaluate_passkey(
    gen: Generation, lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int, choices: int = 0
) -> PasskeyResult:
    """Accuracy per (length, depth) over `trials` independent keys each (see the module docstring); with
    `choices` (eval.retrieval_choices), each trial is also scored by likelihood against `choices - 1` distractors
    from the prefill its generation uses (`Engine.greedy_and_choices`)."""
    tokenizer = gen.tokenizer
    usable: list[int] = []
    skipped: list[dict] = []
    for L in sorted(set(int(n) for n in lengths)):
        try:
            build_prompt(tokenizer, L, 0.0, str(KEY_MAX))
            usable.append(L)
        except EvalError as exc:
            log.warning("passkey length %d skipped: %s", L, exc.message)
            skipped.append({"length": L, "reason": exc.message})
    if not usable:
        raise EvalError(
            f"No passkey length fits a prompt: {skipped[-1]['reason'] if skipped else 'no lengths given'}",
            "Set eval.passkey_lengths (or eval.lengths) to longer lengths.",
        )
    cells = [(L, float(d), t) for L in usable for d in depths for t in range(trials)]
    prompts = [build_prompt(tokenizer, L, d, draw_key(seed, L, d, t)) for L, d, t in cells]
    items = [
        make_item(tokenizer, "passkey", L, t, p.tokens, [p.key], seed, choices, depth=d)
        for (L, d, t), p in zip(cells, prompts)
        if choices
    ]
    candidates = [tuple(tuple(c) for c in item.choices) for item in items] or [()] * len(prompts)
    jobs = [GenJob(p.tokens, MAX_NEW_TOKENS, c) for p, c in zip(prompts, candidates)]

    def score(i: int, out: list[int]) -> float:
        return float(first_number(tokenizer.decode(out)) == prompts[i].key)

    hits, logps = run_jobs_with_choices(gen, jobs, score)
    records = [PasskeyTrial(L, d, t, p.key, h > 0.5) for (L, d, t), p, h in zip(cells, prompts, hits)]
    scored = [ChoiceScore(item, lp[0], max(lp[1:])) for item, lp in zip(items, logps)]
    result = PasskeyResult(usable, [float(d) for d in depths], trials, records, skipped, scored)
    log.info("passkey overall accuracy %.3f over %d keys", result.metrics()["overall"], len(records))
    return result
