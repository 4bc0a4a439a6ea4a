"""RULER-style tasks: a small subset of RULER's synthetic long-context tasks, generated offline.

Task definitions follow RULER (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
Long-Context Language Models?", arXiv 2404.06654; github.com/NVIDIA/RULER). This is a RULER-*style*
subset with rlab's own wording and haystack, not RULER itself; its numbers are not RULER scores.

- ``niah_multikey``: four needles "The special magic number for <key> is <7-digit number>." with
  different word-pair keys at random depths of the haystack; the question names one key (RULER's
  niah_multikey_1: essay haystack, 4 keys, numbers). Reference: that key's number.
- ``niah_multivalue``: one key, four needles with four different numbers (RULER's niah_multivalue).
  References: all four numbers.
- ``vt`` (variable tracking): one chain of four hops "VAR A = 12345.", "VAR B = VAR A.", ... in
  order at random depths; the question asks which variables hold the value (RULER's vt: 1 chain, 4
  hops; here the haystack is prose, not RULER's repeated noise sentence). References: the 5 names.
- ``cwe`` (common-word extraction): a numbered list where 10 common words appear r times each and
  the other words once; the question asks for the 10 most common (RULER's cwe: 6 and 1 below 4k
  tokens, 30 and 3 from 4k; here r is lowered to 5, 4 or 3 when 6 does not fit, and the length is
  skipped when 3 does not; no few-shot example). References: the 10 common words.

The haystack is text of the long-document set (`rlab.data.long_docs`): whole sentences from a random
place in one of its first documents, the needles inserted between sentences. Keys and words come
from that text's vocabulary. Every example is generated from `stable_seed(seed, task, length,
trial)`, so it is independent of the others and identical for every variant.

A prompt (BOS, instruction, context, question ending in an answer prefix, as RULER does for base
models) has exactly `length - max_new` tokens, so prompt plus answer fill `length` (RULER counts the
answer in its sequence length); cwe is brought to that length with a fragment of long-document
text before the instruction. The model decodes `max_new` tokens greedily. Scoring is RULER's
`string_match_all`: the fraction of the references that occur in the decoded output, case-
insensitively; a trial's score is in [0, 1]. Per (task, length): the mean score and the number of
examples; per length: the mean over tasks. Every trial is one row of ruler_trials.csv (task, length,
trial, score): the independent units the report's intervals resample.
"""

from __future__ import annotations

import logging
import random
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlab.errors import EvalError
from rlab.evals.retrieval.generation import Generation, GenJob, run_jobs_with_choices, stable_seed

log = logging.getLogger(__name__)

CITATION = "Hsieh et al. 2024, RULER (arXiv 2404.06654)"
FILLER_DOCS = 32
"""Documents of the long-document set the haystack draws from (the first, in set order)."""
MAX_SENTENCE_CHARS = 400
MIN_HAYSTACK_TOKENS = 16
MIN_WORDS = 40
"""Distinct words (4-10 letters) the haystack must offer: keys are word pairs, cwe needs 10 common + 10 other words."""
MAX_NEW = {"niah_multikey": 12, "niah_multivalue": 40, "vt": 30, "cwe": 64}
"""Tokens decoded per task at least; more when the answer itself takes more in this tokenizer (`answer_budget`)."""
ANSWER_SLACK = 4

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\b[a-z]{4,10}\b")


def split_sentences(text: str) -> list[str]:
    """Sentences of a text on one line each; very long ones (verse, lists) cut at spaces."""
    flat = re.sub(r"\s+", " ", text).strip()
    out: list[str] = []
    for s in _SENTENCE_END.split(flat):
        while len(s) > MAX_SENTENCE_CHARS:
            cut = s.rfind(" ", 0, MAX_SENTENCE_CHARS)
            cut = cut if cut > 0 else MAX_SENTENCE_CHARS
            out.append(s[:cut])
            s = s[cut:].lstrip()
        if s:
            out.append(s)
    return out


class Haystack:
    """Sentences of the long documents, tokenized on demand, and the words they use."""

    def __init__(self, tokenizer, texts: Sequence[str]) -> None:
        if not texts:
            raise EvalError(
                "The RULER-style tasks need long documents for their haystack; the set is empty.",
                "Build it with `rlab data long-docs`.",
            )
        self.tokenizer = tokenizer
        self.docs = [split_sentences(t) for t in texts[:FILLER_DOCS]]
        self.docs = [d for d in self.docs if d]
        self._cache: dict[str, list[int]] = {}
        self.words = sorted({w for d in self.docs for s in d for w in _WORD.findall(s)})
        if len(self.words) < MIN_WORDS:
            raise EvalError(
                f"The long documents give only {len(self.words)} distinct words; the RULER-style "
                f"tasks need at least {MIN_WORDS}.",
                "Add longer texts with `rlab data long-docs --from PATH`.",
            )

    def encode(self, sentence: str) -> list[int]:
        ids = self._cache.get(sentence)
        if ids is None:
            ids = self._cache[sentence] = self.tokenizer.encode(" " + sentence)
        return ids

    def sentences(self, rng: random.Random, n_tokens: int) -> list[list[int]]:
        """Consecutive sentences from a random place (continuing into the next document) totalling exactly
        `n_tokens` tokens (the last one cut)."""
        d = rng.randrange(len(self.docs))
        i = rng.randrange(len(self.docs[d]))
        out: list[list[int]] = []
        total = 0
        while total < n_tokens:
            ids = self.encode(self.docs[d][i])
            take = ids[: n_tokens - total]
            out.append(take)
            total += len(take)
            i += 1
            if i == len(self.docs[d]):
                d, i = (d + 1) % len(self.docs), 0
        return out


@dataclass(frozen=True)
class Example:
    prompt: list[int]
    references: list[str]
    max_new: int
    """Tokens to decode: the prompt has `length - max_new` tokens."""
    others: tuple[str, ...] = ()
    """cwe: the list's words that occur once (likelihood scoring draws its distractors from them)."""


def answer_budget(tokenizer, task: str, references: Sequence[str]) -> int:
    """Tokens decoded for one example: MAX_NEW[task], or the references written as a list plus a little slack
    when that is longer (a small vocabulary spends many tokens on a 5-letter name), so an answer always fits."""
    return max(MAX_NEW[task], len(tokenizer.encode(" " + ", ".join(references))) + ANSWER_SLACK)


def _insert(sentences: list[list[int]], needles: list[list[int]], depths: list[float]) -> list[int]:
    """Sentences with each needle inserted before sentence int(k * depth) (needles in the order given)."""
    k = len(sentences)
    at: dict[int, list[list[int]]] = {}
    for needle, depth in zip(needles, depths):
        at.setdefault(min(k, int(k * depth)), []).append(needle)
    out: list[int] = []
    for j in range(k + 1):
        for needle in at.get(j, []):
            out += needle
        if j < k:
            out += sentences[j]
    return out


def _with_haystack(
    hay: Haystack,
    rng: random.Random,
    length: int,
    max_new: int,
    head: str,
    needles: list[str],
    tail: str,
    ordered: bool = False,
) -> list[int]:
    tok = hay.tokenizer
    head_ids = [tok.bos_token_id, *tok.encode(head)]
    tail_ids = tok.encode(tail)
    needle_ids = [tok.encode(" " + n) for n in needles]
    room = length - max_new - len(head_ids) - len(tail_ids) - sum(map(len, needle_ids))
    if room < MIN_HAYSTACK_TOKENS:
        raise EvalError(f"length {length} leaves {room} tokens of haystack (needs {MIN_HAYSTACK_TOKENS})")
    depths = [rng.random() for _ in needles]
    if ordered:
        depths.sort()
    return head_ids + _insert(hay.sentences(rng, room), needle_ids, depths) + tail_ids


def _key(hay: Haystack, rng: random.Random) -> str:
    return f"{rng.choice(hay.words)}-{rng.choice(hay.words)}"


def _number(rng: random.Random, digits: int = 7) -> str:
    return str(rng.randint(10 ** (digits - 1), 10**digits - 1))


def niah_multikey(hay: Haystack, rng: random.Random, length: int) -> Example:
    keys: list[str] = []
    while len(keys) < 4:
        k = _key(hay, rng)
        if k not in keys:
            keys.append(k)
    values = [_number(rng) for _ in keys]
    q = rng.randrange(len(keys))
    needles = [f"The special magic number for {k} is {v}." for k, v in zip(keys, values)]
    head = "Some special magic numbers are hidden in the text below. Memorize them: you will be asked about one.\n"
    tail = (
        f"\nWhat is the special magic number for {keys[q]} mentioned in the text above? "
        f"The special magic number for {keys[q]} is"
    )
    refs = [values[q]]
    budget = answer_budget(hay.tokenizer, "niah_multikey", refs)
    return Example(_with_haystack(hay, rng, length, budget, head, needles, tail), refs, budget)


def niah_multivalue(hay: Haystack, rng: random.Random, length: int) -> Example:
    key = _key(hay, rng)
    values: list[str] = []
    while len(values) < 4:
        v = _number(rng)
        if v not in values:
            values.append(v)
    needles = [f"The special magic number for {key} is {v}." for v in values]
    head = "Some special magic numbers are hidden in the text below. Memorize them: you will be asked about them.\n"
    tail = (
        f"\nWhat are all the special magic numbers for {key} mentioned in the text above? "
        f"The special magic numbers for {key} are"
    )
    budget = answer_budget(hay.tokenizer, "niah_multivalue", values)
    return Example(_with_haystack(hay, rng, length, budget, head, needles, tail), values, budget)


def vt(hay: Haystack, rng: random.Random, length: int) -> Example:
    names: list[str] = []
    while len(names) < 5:
        n = "".join(rng.choices(string.ascii_uppercase, k=5))
        if n not in names:
            names.append(n)
    value = str(rng.randint(10000, 99999))
    needles = [f"VAR {names[0]} = {value}."] + [f"VAR {names[j + 1]} = VAR {names[j]}." for j in range(4)]
    head = "Memorize and track the chain of variable assignments hidden in the text below.\n"
    tail = (
        f"\nQuestion: Which variables are assigned the value {value} in the text above? "
        f"Answer: the variables assigned the value {value} are:"
    )
    budget = answer_budget(hay.tokenizer, "vt", names)
    return Example(_with_haystack(hay, rng, length, budget, head, needles, tail, ordered=True), names, budget)


def cwe(hay: Haystack, rng: random.Random, length: int) -> Example:
    tok = hay.tokenizer
    head = (
        "\nBelow is a numbered list of words. Some of them appear more often than others: remember which.\n"
    )
    tail = "\nQuestion: What are the 10 most common words in the list above? Answer: the 10 most common words are:"
    head_ids, tail_ids = tok.encode(head), tok.encode(tail)
    pool = rng.sample(hay.words, min(len(hay.words), 2000))
    common, rest = pool[:10], pool[10:]
    budget = answer_budget(tok, "cwe", common)
    room = length - budget - 1 - len(head_ids) - len(tail_ids)

    def entries(words: list[str]) -> list[list[int]]:
        return [tok.encode(f" {i + 1}. {w}") for i, w in enumerate(words)]

    uncommon = 1 if length < 4096 else 3
    for repeats in [6, 5, 4, 3] if length < 4096 else [30]:
        words = common * repeats
        used = sum(map(len, entries(words)))
        others = 0
        for w in rest:
            cost = sum(len(tok.encode(f" {len(words) + k + 1}. {w}")) for k in range(uncommon))
            if used + cost > room:
                break
            words, used, others = words + [w] * uncommon, used + cost, others + 1
        if others < 10:
            continue
        rng.shuffle(words)
        body = entries(words)
        while sum(map(len, body)) > room:  # tokenization may differ slightly after shuffling
            body.pop()
        flat = [t for e in body for t in e]
        pad = [t for s in hay.sentences(rng, room - len(flat)) for t in s] if room > len(flat) else []
        once = tuple(rest[:others])
        return Example([tok.bos_token_id, *pad, *head_ids, *flat, *tail_ids], common, budget, once)
    raise EvalError(f"length {length} is too short for 10 common words repeated 3 times and 10 other words")


TASKS: dict[str, Callable[[Haystack, random.Random, int], Example]] = {
    "niah_multikey": niah_multikey,
    "niah_multivalue": niah_multivalue,
    "vt": vt,
    "cwe": cwe,
}


def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """RULER's metric for these tasks: the fraction of references found in the prediction (case-insensitive)."""
    pred = prediction.lower()
    return sum(r.lower() in pred for r in references) / len(references)


@dataclass(frozen=True)
class RulerTrial:
    task: str
    length: int
    trial: int
    score: float


@dataclass
class RulerResult:
    tasks: list[str]
    lengths: list[int]
    trials: int
    records: list[RulerTrial]
    skipped: list[dict]

    def task_rows(self) -> list[dict]:
        rows = []
        for task in self.tasks:
            for L in self.lengths:
                scores = [r.score for r in self.records if r.task == task and r.length == L]
                if scores:
                    rows.append(
                        {"task": task, "length": L, "score": sum(scores) / len(scores), "n": len(scores)}
                    )
        return rows

    def metrics(self) -> dict:
        rows = self.task_rows()
        by_length = []
        for L in self.lengths:
            at = [r for r in rows if r["length"] == L]
            if at:
                by_length.append(
                    {
                        "length": L,
                        "score": sum(r["score"] for r in at) / len(at),
                        "tasks": len(at),
                        "n": sum(r["n"] for r in at),
                    }
                )
        return {
            "name": "RULER-style subset",
            "citation": CITATION,
            "scoring": (
                "string_match_all: fraction of the references found in the greedy output (case-insensitive); "
                "prompt + answer = length tokens; mean per (task, length) over independently generated examples "
                "(ruler_trials.csv, the units); by_length = mean over the tasks run at that length"
            ),
            "tasks": self.tasks,
            "lengths": self.lengths,
            "trials": self.trials,
            "units": len(self.records),
            "max_new_tokens": {t: MAX_NEW[t] for t in self.tasks},
            "max_new_tokens_rule": f"at least max_new_tokens, or the references as a comma-separated list + {ANSWER_SLACK}",
            "by_task": rows,
            "by_length": by_length,
            "skipped": self.skipped,
        }


def evaluate_ruler(
    gen: Generation,
    texts: Sequence[str],
    tasks: Sequence[str],
    lengths: Sequence[int],
    trials: int,
    seed: int,
) -> RulerResult:
    """Scores of every (task, length, trial); examples the lengths cannot hold are skipped with a reason."""
    tokenizer = gen.tokenizer
    hay = Haystack(tokenizer, texts)
    examples: list[tuple[str, int, int, Example]] = []
    skipped: list[dict] = []
    for task in tasks:
        make = TASKS[task]
        for L in sorted(set(int(n) for n in lengths)):
            try:
                made = [
                    make(hay, random.Random(stable_seed("ruler", task, seed, L, t)), L) for t in range(trials)
                ]
            except EvalError as exc:
                log.warning("RULER-style %s at length %d skipped: %s", task, L, exc.message)
                skipped.append({"task": task, "length": L, "reason": exc.message})
                continue
            examples += [(task, L, t, ex) for t, ex in enumerate(made)]
    jobs = [GenJob(ex.prompt, ex.max_new) for _, _, _, ex in examples]
    bos = tokenizer.bos_token_id

    def score(i: int, out: list[int]) -> float:
        if bos in out:
            out = out[: out.index(bos)]
        return string_match_all(tokenizer.decode(out), examples[i][3].references)

    scores = run_jobs_with_choices(gen, jobs, score)[0]
    records = [RulerTrial(task, L, t, s) for (task, L, t, _), s in zip(examples, scores)]
    used_lengths = sorted({r.length for r in records})
    result = RulerResult(list(tasks), used_lengths, trials, records, skipped)
    for row in result.metrics()["by_length"]:
        log.info(
            "RULER-style mean score at %d: %.3f over %d tasks", row["length"], row["score"], row["tasks"]
        )
    return result
