"""What training measures and shows on its way: val bits per byte and a greedy sample.

A minimal, training-time version of the metric (`rlab.evals` holds the full evaluation); both run under
no_grad with the model in eval mode, and give the memory they used back before training goes on.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from rlab.core.bpb import score_tokens
from rlab.core.distributed import DistInfo, all_reduce_sum
from rlab.core.gpt import GPT
from rlab.core.loader import TokenLoader
from rlab.core.metrics import MemoryMeter, MetricsWriter
from rlab.core.precision import Precision
from rlab.core.tokenizer import Tokenizer
from rlab.tracking import Tracker

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)

SAMPLE_PROMPT = "The"
SAMPLE_TOKENS = 24


Autocast = Callable[[], contextlib.AbstractContextManager]
"""The run's autocast context (`rlab.core.precision.Precision.autocast`)."""


def training_val_bpb(
    model: GPT,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    num_batches: int,
    token_bytes: torch.Tensor,
    info: DistInfo,
    amp: Autocast,
) -> float:
    """Bits per byte on `num_batches` val batches (all ranks), under no_grad; special tokens excluded.

    A minimal, training-time version of the metric; `rlab.evals` holds the full evaluation.
    """
    sums = torch.zeros(2, dtype=torch.float64, device=info.device)  # [nats, bytes]
    for _ in range(num_batches):
        x, y = next(batches)  # (B, T) each
        with amp():
            nats, nbytes, _ = score_tokens(model, x, y, token_bytes)  # (B,) each
        sums += torch.stack([nats.sum(), nbytes.sum()])
    totals = all_reduce_sum(sums, info)
    return float(totals[0] / (math.log(2) * totals[1])) if totals[1] > 0 else float("nan")


def sample_text(
    model: GPT,
    tokenizer: Tokenizer,
    device: torch.device,
    amp: Autocast,
    prompt: str = SAMPLE_PROMPT,
    max_tokens: int = SAMPLE_TOKENS,
) -> str:
    """Greedy continuation of `prompt` (a quick look at what the model says; no KV cache needed at this size)."""
    ids = tokenizer.encode(prompt, prepend=tokenizer.bos_token_id)
    x = torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)
    with torch.no_grad():
        for _ in range(max_tokens):
            with amp():
                logits = model(x[:, -model.config.sequence_len :], last_logits=True)  # (1, 1, V)
            nxt = logits[:, -1].float().argmax(dim=-1, keepdim=True)  # (1, 1)
            x = torch.cat([x, nxt], dim=1)
    return tokenizer.decode(x[0, 1:].tolist())


@dataclass
class TrainingEvals:
    """Val bits per byte and a greedy sample of one run's model, each logged (and the bpb tracked)."""

    model: GPT
    tokenizer: Tokenizer
    token_bytes: torch.Tensor
    """(V,) bytes per token id, 0 for special tokens."""
    dist: DistInfo
    precision: Precision
    open_val: Callable[[], TokenLoader]
    """A fresh val loader: every eval scores the same batches."""
    val_batches: int
    memory: MemoryMeter
    metrics: MetricsWriter
    tracker: Tracker

    def evaluate(self, step: int) -> float:
        """Val bpb on `val_batches` batches (all ranks); written to metrics.jsonl and the tracker."""
        loader = self.open_val()
        self.model.eval()
        try:
            bpb = training_val_bpb(
                self.model, loader, self.val_batches, self.token_bytes, self.dist, self.precision.autocast
            )
        finally:
            loader.close()
            self.model.train()
        peak = self.memory.peak_mb()
        self.memory.release_cached()
        self.memory.reset()
        logger.info("step %d: val bpb %.4f (peak memory this interval %.0f MB)", step, bpb, peak)
        self.metrics.write({"type": "eval", "step": step, "val_bpb": bpb, "peak_mem_mb": peak})
        self.tracker.log({"val/bpb": bpb, "val/peak_mem_mb": peak}, step=step)
        return bpb

    def sample(self, step: int) -> None:
        """Rank 0 logs the model's greedy continuation of `SAMPLE_PROMPT`."""
        if self.dist.is_main:
            self.model.eval()
            try:
                text = sample_text(self.model, self.tokenizer, self.dist.device, self.precision.autocast)
            finally:
                self.model.train()
            self.memory.release_cached()
            logger.info("step %d sample: %r", step, text)
