"""`rlab eval`'s side of likelihood-scored retrieval: items scored, their summary and choices CSV made.

The items are the very prompts the generation scores used (passkey's and ruler's `run` modules rebuild them:
passkey prompts from their keys, RULER-style examples from their seeds), so the two scores of one item are
paired; scoring and the record format are `rlab.evals.retrieval.likelihood`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlab.core.engine import Engine
from rlab.evals.context import EvalContext, Table
from rlab.evals.progress import ProgressFn
from rlab.evals.retrieval import likelihood as rl
from rlab.evals.retrieval.generation import Generation
from rlab.evals.retrieval.records import ChoiceTrial

log = logging.getLogger(__name__)


def generation(ctx: EvalContext) -> Generation:
    """What this run's generation evals decode with: the context's model through an `Engine`, its tokenizer,
    device, batching and progress."""
    return Generation(
        Engine(ctx.model, name=ctx.name), ctx.tokenizer, ctx.device, ctx.batch_tokens, ctx.progress
    )


def score_likelihood(
    ctx: EvalContext, items: Sequence[Any], csv_name: str, progress: ProgressFn | None = None
) -> tuple[dict | None, dict[Path, Table]]:
    """Score `items` by likelihood (`rlab.evals.retrieval.likelihood`): the section's `likelihood` record and its
    choices CSV; (None, {}) when eval.retrieval_choices is 0 (a stale CSV of an earlier run is removed)."""

    if not items:
        (ctx.out_dir / csv_name).unlink(missing_ok=True)
        return None, {}
    with ctx.autocast():
        scores = rl.score_items(
            ctx.model, items, ctx.tokenizer.bos_token_id, ctx.device, ctx.batch_tokens, progress
        )
    return likelihood_outputs(ctx, scores, csv_name)


def likelihood_outputs(
    ctx: EvalContext, scores: Sequence[Any], csv_name: str
) -> tuple[dict | None, dict[Path, Table]]:
    """The section's `likelihood` record and its choices CSV from scored items (`likelihood.ChoiceScore`s, however
    they were scored); (None, {}) without any (a stale CSV of an earlier run is removed)."""

    if not scores:
        (ctx.out_dir / csv_name).unlink(missing_ok=True)
        return None, {}
    rows = [
        ChoiceTrial(
            task=s.item.task,
            length=s.item.length,
            depth=s.item.depth,
            trial=s.item.trial,
            right_logp=s.right,
            best_other_logp=s.best_other,
            margin=s.margin,
            correct=int(s.correct),
        )
        for s in scores
    ]
    passkey = scores[0].item.task == "passkey"
    summary = rl.summarize(scores, ctx.spec.retrieval_choices, by_task=not passkey)
    log.info(
        "%s %s by likelihood: accuracy %.3f (chance %.3f), mean margin %+.3f nats/token over %d items",
        ctx.name,
        "passkey" if passkey else "RULER-style",
        summary["accuracy"],
        summary["chance"],
        summary["margin"],
        summary["n"],
    )
    return summary, {ctx.out_dir / csv_name: (ChoiceTrial, rows)}
