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

from rlab.evals.progress import ProgressFn, report, stages
from rlab.evals.ranks import all_reduce_sum, rank_and_world


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from any parts (stable across processes and Python versions)."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class GenJob:
    """One trial: its prompt tokens and how many tokens to decode."""

    prompt: list[int]
    max_new: int


def run_jobs(
    engine,
    jobs: Sequence[GenJob],
    score: Callable[[int, list[int]], float],
    batch_tokens: int,
    device,
    progress: ProgressFn | None = None,
) -> list[float]:
    """score(i, generated tokens) of every job, computed on the rank that owns job i, summed over ranks;
    `progress` gets (len(jobs) * tokens done / tokens of this rank's jobs, len(jobs)), prompt and answer counted."""
    import torch

    rank, world = rank_and_world()
    scores = torch.zeros(len(jobs), dtype=torch.float64, device=device)
    groups: dict[tuple[int, int], list[int]] = {}
    for i in range(rank, len(jobs), world):
        groups.setdefault((len(jobs[i].prompt), jobs[i].max_new), []).append(i)
    (part,) = stages(progress, [len(jobs)])
    total = sum((length + max_new) * len(idxs) for (length, max_new), idxs in groups.items())
    done = 0
    report(part, done, total)
    for (length, max_new), idxs in sorted(groups.items()):
        rows = max(1, batch_tokens // (length + max_new))
        for k in range(0, len(idxs), rows):
            chunk = idxs[k : k + rows]
            outs = engine.greedy([jobs[i].prompt for i in chunk], max_new)
            for i, out in zip(chunk, outs):
                scores[i] = float(score(i, out))
            done += (length + max_new) * len(chunk)
            report(part, done, total)
    return all_reduce_sum(scores).tolist()
