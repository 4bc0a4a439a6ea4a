"""Copy-by-distance: does the model use a passage it saw `d` tokens back?

Each record is one window of exactly `window` input tokens built from natural text (the
long-document set, which no model trained on), and its control, identical but for the first
passage:

    record:   BOS | prefix (8) | X (32) | filler ... | X (ends the window)
    control:  BOS | prefix (8) | Y (32) | filler ... | X

X and Y are passages drawn from elsewhere in the set. The final X is scored on the same targets
X[1:] (the first token of a copy cannot be known to start one) in both windows, at the same
position after the same filler, so the only difference is whether X appeared `distance = window
- prefix - passage` tokens earlier:

* `control_nats`: mean loss on the final X in the control (everything but the copy: the baseline);
* `copy_nats`: mean loss on the final X in the record, and `copy_acc` its greedy hit rate;
* `gain` = control_nats - copy_nats, nats per token the model saves by looking back that far.

(Comparing with X's *first* occurrence instead would credit the copy with everything the
filler's context does for prediction: measured on a nanochat-2026 base whose attention could
not reach the first X at all, that "gain" was +0.7 nats/token.)

Windows run from below to beyond the training length, so the dependency distance grows with
the window: at a window past what a RoPE variant handles, the copy stops helping. Records are
**nested** across windows: record i is drawn once, from `random.Random(seed, i)`, for the longest
window of the run (X, Y, the prefix and a filler as long as that window's gap), and at a shorter
window keeps the filler's last `gap` tokens, so the text right before the repeat is the same at every
distance and only the gap varies. Every tag is scored on the same records, and a record's gains at
two distances are paired (the report's retention of the copy, gain far / gain near, is estimated per
record). Records are the independent units of the intervals (a per-record bootstrap of the gain).
Ranks take records i = rank (mod world) and the per-record sums are all-reduced.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlab.errors import EvalError
from rlab.evals.progress import ProgressFn, report, stages
from rlab.evals.ranks import all_reduce_sum, rank_and_world

log = logging.getLogger(__name__)

PREFIX = 8
"""Natural-text tokens before the first copy (so the passage does not start the window)."""
PASSAGE = 32
"""Tokens of the repeated passage X."""
COLUMNS = ("window", "distance", "record", "control_nats", "copy_nats", "copy_acc", "tokens")
CONTROL_DRAWS = 100
"""Draws of the control's passage before a long-document set counts as too repetitive to give one."""
USEFUL_GAIN = 0.25
"""Nats per token a repeat must save over the control (95% lower bound) before a model counts as using a passage
seen that far back: a model that copies saves nats (the passage is then nearly free); a few hundredths is a
model that does not. The demo's go/no-go and the report's caveat both judge by it."""


@dataclass(frozen=True)
class CopyRecord:
    """One window of `len(tokens) - 1` inputs; X occupies [first, first + P) and [second, second + P).
    `control` is the same window with another passage at [first, first + P)."""

    tokens: list[int]
    control: list[int]
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


def _gap(window: int, passage: int, prefix: int) -> int:
    gap = window - prefix - 2 * passage
    if gap < 0:
        raise EvalError(
            f"Copy-by-distance window {window} is too short: a record needs at least "
            f"{prefix + 2 * passage} tokens.",
            "Use longer eval lengths.",
        )
    return gap


def build_record(
    docs: Sequence[Sequence[int]],
    bos: int,
    window: int,
    seed: int,
    index: int,
    passage: int = PASSAGE,
    prefix: int = PREFIX,
    longest: int | None = None,
) -> CopyRecord:
    """The `index`-th record at `window`, nested in the one at `longest` (default `window`): deterministic
    from seed, index and the longest window; at `window` it keeps the last gap tokens of that filler."""
    gap = _gap(window, passage, prefix)
    full = _gap(max(window, longest or window), passage, prefix)
    rng = random.Random(f"copy:{seed}:{prefix + 2 * passage + full}:{index}")
    x = _span(rng, docs, passage)
    drawn = _span(rng, docs, prefix + full)
    filler = drawn[:prefix] + drawn[len(drawn) - gap :]  # the prefix, then the gap's tail
    for _ in range(CONTROL_DRAWS):  # only a degenerate set repeats a passage exactly
        y = _span(rng, docs, passage)
        if y != x:
            break
    else:
        raise EvalError(
            f"Copy-by-distance: {CONTROL_DRAWS} draws from the long-document set gave no passage of "
            f"{passage} tokens other than the one repeated, so a record has no control.",
            "The set is too repetitive; add varied long documents (`rlab data long-docs --from ...`).",
        )
    tokens = [
        bos,
        *filler[:prefix],
        *x,
        *filler[prefix:],
        *x,
    ]  # window + 1 tokens: inputs and shifted targets
    control = [bos, *filler[:prefix], *y, *filler[prefix:], *x]
    first = 1 + prefix
    return CopyRecord(tokens, control, first, first + distance_of(window, passage, prefix))


def _score(model, records: Sequence[CopyRecord], passage: int, device) -> np.ndarray:
    """(n, 3) per record: mean loss on the final X in the control, in the record, and the record's greedy hits."""
    import torch  # noqa: PLC0415 - defers torch

    from rlab.evals.scored_forward import head_stats, hidden_at  # noqa: PLC0415 - defers torch

    windows = [
        w for r in records for w in (r.control, r.tokens)
    ]  # row 2i: control of record i, 2i + 1: record
    ids = torch.tensor([w[:-1] for w in windows], dtype=torch.long, device=device)  # (2b, W)
    rows, cols, targets = [], [], []
    for row, rec in enumerate(records):
        for k in (2 * row, 2 * row + 1):
            for j in range(1, passage):  # predict X[j] from the token before it
                rows.append(k)
                cols.append(rec.second + j - 1)
                targets.append(rec.tokens[rec.second + j])
    with torch.no_grad():
        hidden = hidden_at(model, ids, rows, cols)  # (N, C)
        nll, hit = head_stats(model, hidden, torch.tensor(targets, dtype=torch.long, device=device))
    nll = nll.double().view(len(records), 2, passage - 1).cpu()
    hit = hit.double().view(len(records), 2, passage - 1).cpu()
    return torch.stack([nll[:, 0].mean(1), nll[:, 1].mean(1), hit[:, 1].mean(1)], dim=1).numpy()


def evaluate_copy_distance(
    model,
    docs: Sequence[Sequence[int]],
    bos: int,
    windows: Sequence[int],
    records: int,
    seed: int,
    batch_tokens: int,
    device,
    passage: int = PASSAGE,
    progress: ProgressFn | None = None,
) -> list[dict]:
    """Per-record rows (see COLUMNS) for every window; `docs` are token lists of natural text."""
    import torch  # noqa: PLC0415 - defers torch

    rank, world = rank_and_world()
    rows: list[dict] = []
    parts = stages(progress, [2 * records * w for w in windows])  # forward tokens (records and controls)
    longest = max(windows, default=0)
    for window, part in zip(windows, parts):
        recs = [build_record(docs, bos, window, seed, i, passage, longest=longest) for i in range(records)]
        per_rec = torch.zeros(records, 3, dtype=torch.float64)
        mine = list(range(rank, records, world))
        per_batch = max(1, batch_tokens // (2 * window))
        report(part, 0, len(mine))
        for i in range(0, len(mine), per_batch):
            idx = mine[i : i + per_batch]
            per_rec[idx] = torch.from_numpy(_score(model, [recs[j] for j in idx], passage, device))
            report(part, i + len(idx), len(mine))
        if world > 1:
            per_rec = all_reduce_sum(per_rec.to(device)).cpu()
        d = distance_of(window, passage)
        for i, (control, copy, acc) in enumerate(per_rec.tolist()):
            rows.append(
                {
                    "window": window,
                    "distance": d,
                    "record": i,
                    "control_nats": control,
                    "copy_nats": copy,
                    "copy_acc": acc,
                    "tokens": passage - 1,
                }
            )
        mean = per_rec.mean(0).tolist()
        log.info(
            "copy at distance %d (window %d): copy %.3f vs control %.3f nats/token, copy acc %.2f",
            d,
            window,
            mean[1],
            mean[0],
            mean[2],
        )
    return rows


GAIN_RESAMPLES = 2000


def mean_interval(
    values: np.ndarray, rng: np.random.Generator, resamples: int = GAIN_RESAMPLES, alpha: float = 0.05
) -> tuple[float, float]:
    """(1 - alpha) percentile-bootstrap interval of a mean over records (records are the independent units).

    Shared by the eval's summary, the demo's go/no-go and the report's copy section, so the three
    draw the same interval from the same records and seed."""
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(1)
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def summarize(rows: Sequence[dict], resamples: int = GAIN_RESAMPLES, seed: int = 0) -> list[dict]:
    """Per window: means, and a 95% per-record bootstrap interval of the gain (control - copy nats)."""
    out = []
    rng = np.random.default_rng(seed)
    for window in sorted({r["window"] for r in rows}):
        sel = [r for r in rows if r["window"] == window]
        control = np.array([r["control_nats"] for r in sel])
        copy = np.array([r["copy_nats"] for r in sel])
        acc = np.array([r["copy_acc"] for r in sel])
        gain = control - copy
        low, high = mean_interval(gain, rng, resamples)
        out.append(
            {
                "window": window,
                "distance": sel[0]["distance"],
                "control_nats": float(control.mean()),
                "copy_nats": float(copy.mean()),
                "gain": float(gain.mean()),
                "gain_ci_low": low,
                "gain_ci_high": high,
                "copy_acc": float(acc.mean()),
                "n": len(sel),
            }
        )
    return out
