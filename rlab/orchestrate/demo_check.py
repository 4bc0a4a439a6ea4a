"""The demo's go/no-go check after pretraining: has the base learned to use context within L0?

The demo is only worth continuing if the base model predicts a passage it saw earlier in its
window far better than the same passage in a window where it did not appear
(rlab.evals.copy_distance.task). If it does not,
every later comparison between RoPE variants measures nothing, so the demo stops and says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rlab.core.tokenizer import Tokenizer
from rlab.data.long_docs import load_long_docs
from rlab.errors import RlabError
from rlab.evals.copy_distance.task import USEFUL_GAIN
from rlab.paths import BaseLayout

MIN_GAIN = USEFUL_GAIN
"""Nats per token the repeat must save over the control (the same passage, not seen before) at the longest
distance within L0, at the 95% lower bound."""
RECORDS = 32


class DemoCheckError(RlabError):
    """The base did not learn what the demo needs."""


@dataclass(frozen=True)
class CheckResult:
    seq_len: int
    rows: list[dict]
    """copy_distance.summarize rows, one per window."""

    @property
    def at_l0(self) -> dict:
        return max(self.rows, key=lambda r: r["window"])

    @property
    def passed(self) -> bool:
        r = self.at_l0
        return math.isfinite(r["gain"]) and r["gain_ci_low"] >= MIN_GAIN


def check_base(base_dir: Path, tag: str, seed: int = 1234) -> CheckResult:
    """Copy loss of the base `tag` at half its training length and at the full length."""
    import torch

    from rlab.core.checkpoint import load_model  # noqa: PLC0415 - defers torch
    from rlab.evals.copy_distance import task as cd  # noqa: PLC0415 - defers torch

    layout = BaseLayout(base_dir)
    model, meta = load_model(layout.checkpoint_dir(tag), None, torch.device("cpu"))
    model.eval()
    seq_len = meta.sequence_len
    tokenizer = Tokenizer.from_directory(layout.tokenizer_dir)
    docs = tokenizer.encode(load_long_docs(base_dir).texts)
    shortest = cd.PREFIX + 2 * cd.PASSAGE + 8
    windows = [w for w in (seq_len // 2, seq_len) if w >= shortest]
    if not windows:
        raise DemoCheckError(
            f"Go/no-go: the base '{tag}' trains at {seq_len} tokens, too short for a copy record "
            f"({shortest} tokens).",
            "Pretrain at a longer pretrain.train.seq_len.",
        )
    rows = cd.evaluate_copy_distance(
        model,
        docs,
        tokenizer.bos_token_id,
        windows,
        RECORDS,
        seed,
        batch_tokens=8 * seq_len,
        device=torch.device("cpu"),
    )
    return CheckResult(seq_len, cd.summarize(rows, seed=seed))


def require_pass(result: CheckResult, tag: str) -> None:
    if result.passed:
        return
    r = result.at_l0
    raise DemoCheckError(
        f"Go/no-go: the base '{tag}' does not use context within its training length {result.seq_len}: a passage "
        f"repeated {r['distance']} tokens back costs {r['copy_nats']:.2f} nats/token vs {r['control_nats']:.2f} "
        f"unseen (gain {r['gain']:+.2f}, 95% low {r['gain_ci_low']:+.2f}; need >= {MIN_GAIN}). Comparing RoPE "
        "variants on it would measure nothing, so the demo stops here.",
        "Pretrain longer (pretrain.train.steps in the demo spec), keep its pretrain.train.seq_len_warmup (a "
        "small model learns to copy in short rows), and check that the data was prepared with --copy-records.",
    )
