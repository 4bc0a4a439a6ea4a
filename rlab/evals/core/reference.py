"""CORE's reference scoring, nanochat's: one example per forward, full logits at every position.

An example's sequences are stacked and right-padded into one batch. multiple_choice/schema: the option
with the lowest mean cross-entropy over its span wins; language_modeling: correct iff greedy argmax
reproduces every span token. `rlab.evals.core.packed` computes the same numbers with less work and is
tested against this.
"""

from __future__ import annotations

import math

from rlab.evals.core.prompts import EncodedExample


def _forward_rows(model, rows: list[list[int]], starts: list[int], ends: list[int], pad_id: int, device):
    """The reference: one forward over right-padded rows with full logits (B, T, V) -> per row
    (mean span loss, span fully argmax-correct)."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, T)
    row_idx: list[int] = []
    pos_idx: list[int] = []
    for i, (r, s, e) in enumerate(zip(rows, starts, ends)):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        row_idx += [i] * max(e - s, 0)
        pos_idx += range(s - 1, e - 1)  # position p predicts token p + 1
    ids = ids.to(device)
    rows_t = torch.tensor(row_idx, dtype=torch.long, device=device)  # (N,)
    pos_t = torch.tensor(pos_idx, dtype=torch.long, device=device)  # (N,)
    with torch.inference_mode():
        logits = model(ids)  # (B, T, V)
        picked = logits[rows_t, pos_t].float()  # (N, V)
        targets = ids[rows_t, pos_t + 1]  # (N,)
        stats = _span_stats(picked, targets, rows_t, len(rows))
    return span_scores(stats, [e - s for s, e in zip(starts, ends)])


def _span_stats(logits, targets, seq_idx, n_seqs: int) -> list[list[float]]:
    """Per-position nll / argmax hits (logits (N, V), targets (N,)) summed per sequence -> [loss sums, hit sums]."""
    import torch.nn.functional as F

    nll = F.cross_entropy(logits, targets, reduction="none")  # (N,)
    hit = logits.argmax(dim=-1) == targets  # (N,)
    return sum_per_seq(nll, hit, seq_idx, n_seqs)


def sum_per_seq(nll, hit, seq_idx, n_seqs: int) -> list[list[float]]:
    """Per-position nll and argmax hits (N,) summed per sequence (fp64) -> [loss sums, hit sums]."""
    import torch

    loss_sum = torch.zeros(n_seqs, dtype=torch.float64, device=nll.device).index_add_(
        0, seq_idx, nll.double()
    )
    hit_sum = torch.zeros(n_seqs, dtype=torch.float64, device=nll.device).index_add_(0, seq_idx, hit.double())
    return torch.stack([loss_sum, hit_sum]).tolist()  # one device-to-host transfer


def span_scores(stats: list[list[float]], span_lens: list[int]) -> list[tuple[float, bool]]:
    out: list[tuple[float, bool]] = []
    for i, n in enumerate(span_lens):
        if n <= 0:  # empty span (a choice that is a prefix of another): never the argmin
            out.append((math.inf, False))
        else:
            out.append((stats[0][i] / n, stats[1][i] == n))
    return out


def judge(ex: EncodedExample, scores: list[tuple[float, bool]]) -> bool:
    """Correctness of one example from its sequences' (mean loss, all-match) scores."""
    if ex.task_type == "language_modeling":
        return scores[0][1]
    losses = [s[0] for s in scores]
    return losses.index(min(losses)) == ex.gold


def evaluate_example(model, ex: EncodedExample, pad_id: int, device) -> bool:
    """The reference definition: one example's sequences in one forward pass, full logits."""
    return judge(ex, _forward_rows(model, ex.tokens, ex.starts, ex.ends, pad_id, device))
