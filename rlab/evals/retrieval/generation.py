"""Shared machinery of the generation evals (passkey, RULER-style tasks): seeds, batching, ranks.

Every trial has its own random content drawn from `stable_seed(seed, ...)` (a hash, not Python's
salted `hash`), so trials are independent units, every variant sees the same trials, and the
numbers do not depend on world size or batch size. Prompts of one length are prefilled together
and decoded greedily through the KV cache (`Engine.greedy`); ranks take trials i = rank (mod world)
and the per-trial scores are summed across ranks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlab.core.rope_frequencies import frequency_length
from rlab.evals.progress import ProgressFn, report, stages
from rlab.evals.ranks import all_reduce_sum, rank_and_world


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from any parts (stable across processes and Python versions)."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class GenJob:
    """One trial: its prompt tokens, how many tokens to decode, and candidate answers to score by likelihood
    from the same prefill (`Engine.greedy_and_choices`; none by default)."""

    prompt: list[int]
    max_new: int
    choices: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class Generation:
    """What a generation eval decodes with: the model's `Engine` and tokenizer on `device`, prompts of one length
    prefilled `batch_tokens` positions at a time, `progress` told how far it got."""

    engine: Any
    tokenizer: Any
    device: Any
    batch_tokens: int = 8192
    progress: ProgressFn | None = None


def run_jobs_with_choices(
    gen: Generation, jobs: Sequence[GenJob], score: Callable[[int, list[int]], float]
) -> tuple[list[float], list[list[float]]]:
    """score(i, generated tokens) of every job, computed on the rank that owns job i, summed over ranks (`progress`
    gets (len(jobs) * tokens done / tokens of this rank's jobs, len(jobs)), prompt and answer counted), and each
    job's candidates' mean log-probabilities per token ([] for a job without any).

    A job's candidates are scored from its generation's prefill, where the RoPE frequencies allow: a
    length-dependent variant (dynamic-ntk) is evaluated at prompt + the longest candidate for likelihood
    (as CORE's packed scoring pads a row) but at prompt + max_new for generation, so there the candidates get
    their own prefill at their length."""
    import torch

    rank, world = rank_and_world()
    n_choices = max((len(j.choices) for j in jobs), default=0)
    scores = torch.zeros(len(jobs), dtype=torch.float64, device=gen.device)
    logps = torch.zeros(len(jobs), n_choices, dtype=torch.float64, device=gen.device)
    # (prompt length, tokens to decode, the length RoPE is evaluated at (0: prompt + decoded), with candidates)
    groups: dict[tuple[int, int, int, bool], list[int]] = {}
    for i in range(rank, len(jobs), world):
        job = jobs[i]
        length = len(job.prompt)
        longest = length + max((len(c) for c in job.choices), default=0)
        if job.choices and _freq(gen.engine, length + job.max_new) != _freq(gen.engine, longest):
            groups.setdefault((length, job.max_new, 0, False), []).append(i)
            groups.setdefault((length, 0, longest, True), []).append(i)
        else:
            groups.setdefault((length, job.max_new, 0, bool(job.choices)), []).append(i)
    (part,) = stages(gen.progress, [len(jobs)])
    total = sum((length + max_new) * len(idxs) for (length, max_new, _, _), idxs in groups.items())
    done = 0
    report(part, done, total)
    for (length, max_new, seq_len, with_choices), idxs in sorted(groups.items()):
        rows = max(1, gen.batch_tokens // max(length + max_new, seq_len))
        for k in range(0, len(idxs), rows):
            chunk = idxs[k : k + rows]
            prompts = [jobs[i].prompt for i in chunk]
            outs, chosen = (
                gen.engine.greedy_and_choices(
                    prompts, max_new, [jobs[i].choices for i in chunk], seq_len=seq_len or None
                )
                if with_choices
                else (gen.engine.greedy(prompts, max_new), [])
            )
            for n, i in enumerate(chunk):
                if max_new:
                    scores[i] = float(score(i, outs[n]))
                if chosen:
                    logps[i, : len(chosen[n])] = torch.tensor(chosen[n], dtype=torch.float64)
            done += (length + max_new) * len(chunk)
            report(part, done, total)
    all_reduce_sum(scores)
    all_reduce_sum(logps)
    return scores.tolist(), [row[: len(j.choices)] for row, j in zip(logps.tolist(), jobs)]


def _freq(engine, length: int) -> int | None:
    """The length that stands for `length` in the model's RoPE frequencies (None: they do not depend on it)."""

    rope = getattr(engine.model, "rope", None)
    return None if rope is None else frequency_length(rope, length)
