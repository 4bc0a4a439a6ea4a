"""What training measures and shows on its way: val bits per byte and a greedy sample.

A minimal, training-time version of the metric (`rlab.evals` holds the full evaluation); both run under
no_grad with the model in eval mode, and give the memory they used back before training goes on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

from rlab.core.distributed import DistInfo
from rlab.core.trainer_state import TrainerState

logger = logging.getLogger("rlab.core.train")  # the trainer's one log channel (train.log)

SAMPLE_PROMPT = "The"
SAMPLE_TOKENS = 24


def training_val_bpb(model, batches: Iterator, num_batches: int, token_bytes, info: DistInfo, amp) -> float:
    """Bits per byte on `num_batches` val batches (all ranks), under no_grad; special tokens excluded.

    A minimal, training-time version of the metric; `rlab.evals` holds the full evaluation.
    """
    import torch

    from rlab.core.bpb import score_tokens
    from rlab.core.distributed import all_reduce_sum

    sums = torch.zeros(2, dtype=torch.float64, device=info.device)  # [nats, bytes]
    for _ in range(num_batches):
        x, y = next(batches)  # (B, T) each
        with amp():
            nats, nbytes, _ = score_tokens(model, x, y, token_bytes)  # (B,) each
        sums += torch.stack([nats.sum(), nbytes.sum()])
    totals = all_reduce_sum(sums, info)
    return float(totals[0] / (math.log(2) * totals[1])) if totals[1] > 0 else float("nan")


def sample_text(
    model, tokenizer, device, amp, prompt: str = SAMPLE_PROMPT, max_tokens: int = SAMPLE_TOKENS
) -> str:
    """Greedy continuation of `prompt` (a quick look at what the model says; no KV cache needed at this size)."""
    import torch

    ids = tokenizer.encode(prompt, prepend=tokenizer.bos_token_id)
    x = torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)
    with torch.no_grad():
        for _ in range(max_tokens):
            with amp():
                logits = model(x[:, -model.config.sequence_len :], last_logits=True)  # (1, 1, V)
            nxt = logits[:, -1].float().argmax(dim=-1, keepdim=True)  # (1, 1)
            x = torch.cat([x, nxt], dim=1)
    return tokenizer.decode(x[0, 1:].tolist())


class TrainEvals(TrainerState):
    """Evals and samples, as a part of `rlab.core.trainer.Trainer`."""

    def evaluate(self, step: int) -> None:
        plan = self.plan
        num_batches = max(1, math.ceil(self.spec.eval_tokens / plan.tokens_per_micro_step))
        loader = self._make_loader("val", None)
        self.model.eval()
        try:
            bpb = training_val_bpb(self.model, loader, num_batches, self.token_bytes, self.info, self.amp)
        finally:
            loader.close()
            self.model.train()
        peak = self.memory.peak_mb()
        self.memory.release_cached()
        self.memory.reset()
        self.last_val_bpb = bpb
        logger.info("step %d: val bpb %.4f (peak memory this interval %.0f MB)", step, bpb, peak)
        record = {"type": "eval", "step": step, "val_bpb": bpb, "peak_mem_mb": peak}
        self.metrics.write(record)
        self.tracker.log({"val/bpb": bpb, "val/peak_mem_mb": peak}, step=step)

    def sample(self, step: int) -> None:
        if self.info.is_main:
            self.model.eval()
            try:
                text = sample_text(self.model, self.tokenizer, self.device, self.amp)
            finally:
                self.model.train()
            self.memory.release_cached()
            logger.info("step %d sample: %r", step, text)
