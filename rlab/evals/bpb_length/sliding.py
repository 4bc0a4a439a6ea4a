"""YaRN-comparable perplexity: the sliding-window protocol of the YaRN repository, reproduced.

Source: `eval/perplexity.py` (`compute_perplexity`) of github.com/jquesnelle/yarn (Peng et al. 2023,
arXiv 2309.00071), which says it was validated against the PI paper (arXiv 2306.15595). Its
protocol, for one evaluation length L (`max_length`) and stride S (`--sliding-window`, default 256):

- documents are tokenized without special tokens; only documents with at least `--dataset-min-tokens`
  tokens are used, the first `--samples` of them (here: the first `eval.ppl_docs` documents of the
  long-document set with at least the longest eval length in tokens, in set order);
- each window holds BOS plus up to L-1 document tokens (so L tokens in all): windows start at
  b = 0, S, 2S, ... and end at e = min(b + L - 1, n); the last window is the first that reaches
  the document's end;
- targets: in the first window every document token counts (the first one is predicted from BOS
  alone); in every later window only the tokens not scored before, doc[prev_e:e] (the last e - prev_e
  tokens of the window, normally S of them), each predicted with the window's left context;
- a window's loss is the mean NLL over its targets (Hugging Face's mean with ignored labels), and
  the reported perplexity is exp(mean over ALL windows of all documents of the window means): windows
  count equally whatever their number of targets, long documents count more (they have more windows).
- `--truncate` (the protocol of YaRN's Proof-pile tables): each document is cut to its first L-1
  tokens and scored in one window (`eval.ppl_protocol: truncated`).

rlab runs each window as one forward over exactly those L (or fewer, for a short last window)
tokens, so length-dependent RoPE (dynamic-ntk) sees the same window length as in YaRN's code.
Next to the YaRN perplexity, each length also reports the token-weighted BPB of the same targets
(nats over bytes). Units: one per document (its summed nats/bytes, and its window-mean sum and
window count for the perplexity), so a bootstrap resamples documents.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from rlab.core.bpb import score_tokens
from rlab.evals.bpb.score import LN2
from rlab.evals.progress import ProgressFn, report, stages
from rlab.evals.ranks import all_reduce_sum, rank_and_world

log = logging.getLogger(__name__)

SOURCE = "github.com/jquesnelle/yarn eval/perplexity.py compute_perplexity (add_start_token=True)"


@dataclass(frozen=True)
class Window:
    """Document tokens [begin, end) behind a BOS; the last `targets` of them are scored."""

    doc: int
    begin: int
    end: int
    targets: int


def sliding_windows(doc: int, n_tokens: int, length: int, stride: int) -> list[Window]:
    """YaRN's windows over one document of `n_tokens` tokens (no BOS) at window length L (BOS included)."""
    room = length - 1  # YaRN's max_tokenized_len: BOS takes one place
    if room < 1:
        raise ValueError(f"window length {length} leaves no room for document tokens after BOS")
    windows, prev_end = [], 0
    for begin in range(0, n_tokens, stride):
        end = min(begin + room, n_tokens)
        windows.append(
            Window(doc, begin, end, min(end - prev_end, end - begin))
        )  # a stride > L-1 skips tokens
        prev_end = end
        if end == n_tokens:
            break
    return windows


def truncated_window(doc: int, n_tokens: int, length: int) -> list[Window]:
    """YaRN's --truncate: the first L-1 tokens in one window, all scored."""
    end = min(length - 1, n_tokens)
    return [Window(doc, 0, end, end)]


@dataclass
class LengthResult:
    length: int
    ppl: float
    bpb: float
    tokens: int
    windows: int
    docs: int
    units: list[tuple[int, float, float, float, int, int]]
    """(doc, nats, bytes, sum of window-mean NLLs, windows, scored tokens) per document."""


def score_windows(
    model,
    docs: Mapping[int, Sequence[int]],
    windows: Sequence[Window],
    bos: int,
    token_bytes: torch.Tensor,
    batch_tokens: int,
    progress: ProgressFn | None = None,
) -> torch.Tensor:
    """(n_windows, [nats, bytes, tokens]) float64, summed over ranks (rank r scores windows i = r mod world)."""
    rank, world = rank_and_world()
    device = token_bytes.device
    out = torch.zeros(len(windows), 3, dtype=torch.float64, device=device)
    mine = list(range(rank, len(windows), world))
    by_size: dict[int, list[int]] = {}
    for i in mine:
        by_size.setdefault(windows[i].end - windows[i].begin + 1, []).append(i)  # +1: BOS
    done = 0
    report(progress, done, len(mine))
    for size, idxs in sorted(by_size.items()):
        per_batch = max(1, batch_tokens // size)
        for k in range(0, len(idxs), per_batch):
            chunk = idxs[k : k + per_batch]
            x = torch.empty((len(chunk), size), dtype=torch.long)  # (b, W): BOS + document tokens
            y = torch.full((len(chunk), size), -1, dtype=torch.long)  # (b, W): y[t] = x[t+1] where scored
            for row, i in enumerate(chunk):
                w = windows[i]
                toks = torch.as_tensor([bos, *docs[w.doc][w.begin : w.end]], dtype=torch.long)
                x[row] = toks
                first = (
                    size - 1 - w.targets
                )  # predictions at positions first..size-2 target the last `targets`
                y[row, first : size - 1] = toks[first + 1 :]
            nats, nbytes, ntok = score_tokens(model, x.to(device), y.to(device), token_bytes)
            for row, i in enumerate(chunk):
                out[i, 0], out[i, 1], out[i, 2] = nats[row], nbytes[row], ntok[row]
            done += len(chunk)
            report(progress, done, len(mine))
    return all_reduce_sum(out)


def evaluate_sliding(
    model,
    docs: Mapping[int, Sequence[int]],
    doc_order: Sequence[int],
    lengths: Sequence[int],
    stride: int,
    bos: int,
    token_bytes: torch.Tensor,
    batch_tokens: int,
    truncate: bool = False,
    progress: ProgressFn | None = None,
) -> list[LengthResult]:
    """YaRN's perplexity (and BPB) at each length over the documents `doc_order` (document tokens, no BOS)."""
    results = []
    by_length = []
    for length in lengths:
        windows: list[Window] = []
        for d in doc_order:
            n = len(docs[d])
            windows += truncated_window(d, n, length) if truncate else sliding_windows(d, n, length, stride)
        by_length.append(windows)
    parts = stages(progress, [sum(w.end - w.begin + 1 for w in ws) for ws in by_length])  # forward tokens
    for length, windows, part in zip(lengths, by_length, parts):
        log.info(
            "sliding ppl at %d: %d windows (%d forward tokens) over %d documents",
            length,
            len(windows),
            sum(w.end - w.begin + 1 for w in windows),
            len(doc_order),
        )
        sums = score_windows(model, docs, windows, bos, token_bytes, batch_tokens, part).tolist()
        per_doc: dict[int, list[float]] = {d: [0.0, 0.0, 0.0, 0, 0] for d in doc_order}
        for w, (nats, nbytes, ntok) in zip(windows, sums):
            acc = per_doc[w.doc]
            acc[0] += nats
            acc[1] += nbytes
            acc[2] += nats / ntok if ntok > 0 else 0.0
            acc[3] += 1 if ntok > 0 else 0
            acc[4] += int(ntok)
        units = [(d, a[0], a[1], a[2], int(a[3]), int(a[4])) for d, a in per_doc.items()]
        n_windows = sum(u[4] for u in units)
        mean_nll = math.fsum(u[3] for u in units) / n_windows if n_windows else float("nan")
        nbytes = math.fsum(u[2] for u in units)
        results.append(
            LengthResult(
                length=length,
                ppl=math.exp(mean_nll),
                bpb=math.fsum(u[1] for u in units) / (LN2 * nbytes) if nbytes else float("nan"),
                tokens=int(sum(s[2] for s in sums)),
                windows=len(windows),
                docs=len(doc_order),
                units=units,
            )
        )
        log.info(
            "sliding ppl at %d: %.4f (BPB %.4f) over %d windows",
            length,
            results[-1].ppl,
            results[-1].bpb,
            len(windows),
        )
    return results


def convention(truncate: bool, stride: int, docs: int, min_tokens: int) -> str:
    if truncate:
        how = "each document cut to its first L-1 tokens, BOS + those in one window, every token scored"
    else:
        how = (
            f"windows of BOS + up to L-1 document tokens starting every {stride} tokens; the first window scores "
            "all its tokens, later ones only the tokens not scored before; last window reaches the end"
        )
    return (
        f"YaRN sliding-window perplexity ({SOURCE}): {how}; ppl = exp(mean over all windows of each window's "
        f"mean NLL); first {docs} long documents with >= {min_tokens} tokens; bpb = token-weighted over the "
        "same targets; one unit per document"
    )
