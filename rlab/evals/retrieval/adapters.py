"""`rlab eval`'s adapters for likelihood-scored retrieval: passkey trials and RULER-style examples as items.

The items are the very prompts the generation scores used (passkey prompts rebuilt from their keys, RULER-style
examples regenerated from their seeds), so the two scores of one item are paired; scoring and the record
format are `rlab.evals.retrieval.likelihood`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab import records as rec
from rlab.evals.progress import ProgressFn

if TYPE_CHECKING:
    from rlab.evals.registry import EvalContext, Table

log = logging.getLogger(__name__)


def passkey_items(ctx: EvalContext, records: Sequence[Any]) -> list[Any]:
    """The passkey trials as likelihood items (the same prompts and keys), when eval.retrieval_choices asks."""
    from rlab.evals.passkey.task import build_prompt
    from rlab.evals.retrieval.likelihood import make_item

    k = ctx.spec.retrieval_choices
    return [
        make_item(
            ctx.tokenizer,
            "passkey",
            r.length,
            r.trial,
            build_prompt(ctx.tokenizer, r.length, r.depth, r.key).tokens,
            [r.key],
            ctx.spec.seed,
            k,
            depth=r.depth,
        )
        for r in (records if k else [])
    ]


def score_likelihood(
    ctx: EvalContext, items: Sequence[Any], csv_name: str, progress: ProgressFn | None = None
) -> tuple[dict | None, dict[Path, Table]]:
    """Score `items` by likelihood (`rlab.evals.retrieval.likelihood`): the section's `likelihood` record and its
    choices CSV; (None, {}) when eval.retrieval_choices is 0 (a stale CSV of an earlier run is removed)."""
    from rlab.evals.retrieval import likelihood as rl

    if not items:
        (ctx.out_dir / csv_name).unlink(missing_ok=True)
        return None, {}
    with ctx.autocast():
        scores = rl.score_items(
            ctx.model, items, ctx.tokenizer.bos_token_id, ctx.device, ctx.batch_tokens, progress
        )
    rows = [
        rec.ChoiceTrial(
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
    summary = rl.summarize(scores, ctx.spec.retrieval_choices, by_task=items[0].task != "passkey")
    log.info(
        "%s %s by likelihood: accuracy %.3f (chance %.3f), mean margin %+.3f nats/token over %d items",
        ctx.name,
        items[0].task if items[0].task == "passkey" else "RULER-style",
        summary["accuracy"],
        summary["chance"],
        summary["margin"],
        summary["n"],
    )
    return summary, {ctx.out_dir / csv_name: (rec.ChoiceTrial, rows)}


def ruler_items(ctx: EvalContext, texts: Sequence[str], records: Sequence[Any]) -> list[Any]:
    """The RULER-style examples (regenerated from their seeds, identical to the ones generated) as likelihood
    items, when eval.retrieval_choices asks; multi-value answers in the order the text gives them."""
    import random

    from rlab.evals.retrieval.generation import stable_seed
    from rlab.evals.retrieval.likelihood import make_item
    from rlab.evals.ruler.tasks import TASKS, Haystack

    k = ctx.spec.retrieval_choices
    if not k or not records:
        return []
    hay = Haystack(ctx.tokenizer, texts)
    items = []
    for r in records:
        ex = TASKS[r.task](
            hay, random.Random(stable_seed("ruler", r.task, ctx.spec.seed, r.length, r.trial)), r.length
        )
        refs = list(ex.references)
        if r.task in ("niah_multivalue", "vt"):
            text = ctx.tokenizer.decode(ex.prompt)
            refs.sort(key=text.find)
        items.append(
            make_item(
                ctx.tokenizer, r.task, r.length, r.trial, ex.prompt, refs, ctx.spec.seed, k, others=ex.others
            )
        )
    return items
