"""Copy-by-distance: does the model use a passage it saw `d` tokens back?

Each record is one window of exactly `window` input tokens built from natural text (the
long-document set, which no model trained on):

    BOS | prefix (8) | X (32) | filler ... | X again (ends the window)

X is a passage drawn from elsewhere in the set, so its first occurrence is as hard to predict as
any natural text; its second occurrence is predictable only by looking back `distance =
window - prefix - passage` tokens to the first. Both copies are scored on the same targets
X[1:] (the first token of a copy cannot be known to start one):

* `first_nats`: mean loss on X's first occurrence (no useful context: the baseline);
* `copy_nats`: mean loss on X's second occurrence, and `copy_acc` its greedy hit rate;
* `gain` = first_nats - copy_nats, nats per token the model saves by using context at that distance.

Windows run from below to beyond the training length, so the dependency distance grows with
the window: at a window past what a RoPE variant handles, the copy stops helping. Every record
is drawn from `random.Random(seed, window, i)`, so every tag is scored on the same records, and
records are the independent units of the intervals (a per-record bootstrap of the gain).
Ranks take records i = rank (mod world) and the per-record sums are all-reduced.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rlab.errors import EvalError
from rlab.evals.progress import ProgressFn, report, stages

log = logging.getLogger(__name__)

PREFIX = 8
"""Natural-text tokens before the first copy (so the passage does not start the window)."""
PASSAGE = 32
"""Tokens of the repeated passage X."""
COLUMNS = ("window", "distance", "record", "first_nats", "copy_nats", "copy_acc", "tokens")


@dataclass(frozen=True)
class CopyRecord:
    """One window of `len(tokens) - 1` inputs; X occupies [first, first + P) and [second, second + P)."""

    tokens: list[int]
    first: int
    second: int


def distance_of(window: int, passage: int = PASSAGE, prefix: int = PREFIX) -> int:
    """Tokens between the two copies' starts in a window of `window` inputs."""
    return window - prefix - passage


def _span(rng: random.Random, docs: Sequence[Sequence[int]], n: int) -> list[int]:
    """`n` consecutive tokens from a random place of a random document long enough to hold them."""
    fits = [d for d in docs if len(d) > n]
    if not fits:
        raise EvalError(
            f"Copy-by-distance needs natural text of more than {n} tokens in one document; the "
            "long-document set has none that long.",
            "Use shorter eval lengths, or add longer documents to the long-document set.",
        )
    doc = fits[rng.randrange(len(fits))]
    start = rng.randrange(len(doc) - n)
    return list(doc[start : start + n])


def build_record(docs: Sequence[Sequence[int]], bos: int, window: int, seed: int, index: int,
                 passage: int = PASSAGE, prefix: int = PREFIX) -> CopyRecord:
    """The `index`-th record at `window` (deterministic from seed, window and index)."""
    gap = window - prefix - 2 * passage
    if gap < 0:
        raise EvalError(f"Copy-by-distance window {window} is too short: a record needs at least "
                        f"{prefix + 2 * passage} tokens.", "Use longer eval lengths.")
    rng = random.Random(f"copy:{seed}:{window}:{index}")
    x = _span(rng, docs, passage)
    filler = _span(rng, docs, prefix + gap)
    tokens = [bos, *filler[:prefix], *x, *filler[prefix:], *x]  # window + 1 tokens: inputs and shifted targets
    first = 1 + prefix
    return CopyRecord(tokens, first, first + distance_of(window, passage, prefix))


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _score(model, records: Sequence[CopyRecord], passage: int, device) -> np.ndarray:
    """(n, 3) per record: mean loss on the first copy, on the second, and the second's greedy hits."""
    from rlab.evals.scored_forward import head_stats, hidden_at

    ids = torch.tensor([r.tokens[:-1] for r in records], dtype=torch.long, device=device)  # (b, W)
    rows, cols, targets = [], [], []
    for row, rec in enumerate(records):
        for start in (rec.first, rec.second):
            for j in range(1, passage):  # predict X[j] from the token before it
                rows.append(row)
                cols.append(start + j - 1)
                targets.append(rec.tokens[start + j])
    with torch.no_grad():
        hidden = hidden_at(model, ids, rows, cols)  # (N, C)
        nll, hit = head_stats(model, hidden, torch.tensor(targets, dtype=torch.long, device=device))
    nll = nll.double().view(len(records), 2, passage - 1).cpu()
    hit = hit.double().view(len(records), 2, passage - 1).cpu()
    return torch.stack([nll[:, 0].mean(1), nll[:, 1].mean(1), hit[:, 1].mean(1)], dim=1).numpy()


def evaluate_copy_distance(model, docs: Sequence[Sequence[int]], bos: int, windows: Sequence[int], records: int,
                           seed: int, batch_tokens: int, device, passage: int = PASSAGE,
                           progress: ProgressFn | None = None) -> list[dict]:
    """Per-record rows (see COLUMNS) for every window; `docs` are token lists of natural text."""
    rank, world = _world()
    rows: list[dict] = []
    parts = stages(progress, [records * w for w in windows])  # forward tokens
    for window, part in zip(windows, parts):
        recs = [build_record(docs, bos, window, seed, i, passage) for i in range(records)]
        per_rec = torch.zeros(records, 3, dtype=torch.float64)
        mine = list(range(rank, records, world))
        per_batch = max(1, batch_tokens // window)
        report(part, 0, len(mine))
        for i in range(0, len(mine), per_batch):
            idx = mine[i : i + per_batch]
            per_rec[idx] = torch.from_numpy(_score(model, [recs[j] for j in idx], passage, device))
            report(part, i + len(idx), len(mine))
        if world > 1:
            import torch.distributed as dist

            per_rec = per_rec.to(device)
            dist.all_reduce(per_rec)
            per_rec = per_rec.cpu()
        d = distance_of(window, passage)
        for i, (first, copy, acc) in enumerate(per_rec.tolist()):
            rows.append({"window": window, "distance": d, "record": i, "first_nats": first, "copy_nats": copy,
                         "copy_acc": acc, "tokens": passage - 1})
        mean = per_rec.mean(0).tolist()
        log.info("copy at distance %d (window %d): copy %.3f vs first %.3f nats/token, copy acc %.2f",
                 d, window, mean[1], mean[0], mean[2])
    return rows


def summarize(rows: Sequence[dict], resamples: int = 2000, seed: int = 0) -> list[dict]:
    """Per window: means, and a 95% per-record bootstrap interval of the gain (first - copy nats)."""
    out = []
    rng = np.random.default_rng(seed)
    for window in sorted({r["window"] for r in rows}):
        sel = [r for r in rows if r["window"] == window]
        first = np.array([r["first_nats"] for r in sel])
        copy = np.array([r["copy_nats"] for r in sel])
        acc = np.array([r["copy_acc"] for r in sel])
        gain = first - copy
        boot = gain[rng.integers(0, len(gain), size=(resamples, len(gain)))].mean(1)
        out.append({"window": window, "distance": sel[0]["distance"], "first_nats": float(first.mean()),
                    "copy_nats": float(copy.mean()), "gain": float(gain.mean()),
                    "gain_ci_low": float(np.quantile(boot, 0.025)), "gain_ci_high": float(np.quantile(boot, 0.975)),
                    "copy_acc": float(acc.mean()), "n": len(sel)})
    return out
