"""The RULER-style tasks as `rlab eval` runs them: generation per (task, length, trial) over the long-document
set's haystack, then the same examples (regenerated from their seeds) scored by likelihood."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from rlab.evals import long_doc_set
from rlab.evals.context import EvalContext, EvalOutcome
from rlab.evals.retrieval.adapters import generation, score_likelihood
from rlab.evals.retrieval.generation import stable_seed
from rlab.evals.retrieval.likelihood import make_item
from rlab.evals.ruler import CELLS_CSV, CHOICES_CSV, TRIALS_CSV
from rlab.evals.ruler.records import RulerCell, RulerMetric, RulerTrial
from rlab.evals.ruler.settings import RulerSettings
from rlab.evals.ruler.tasks import TASKS, Haystack, evaluate_ruler


def run(ctx: EvalContext) -> EvalOutcome:
    """RULER-style synthetic tasks (rlab.evals.ruler.tasks), haystack from the long-document set."""

    docs = long_doc_set.load(ctx)
    settings = RulerSettings.of(ctx.spec)
    lengths = list(settings.ruler_lengths or ctx.eval_lengths())
    with ctx.autocast():
        res = evaluate_ruler(
            generation(ctx), docs.texts, settings.ruler_tasks, lengths, settings.ruler_trials, ctx.spec.seed
        )
    likelihood, choices = score_likelihood(ctx, ruler_items(ctx, docs.texts, res.records), CHOICES_CSV)
    metric = RulerMetric.model_validate(
        {**res.metrics(), "long_docs": long_doc_set.summary(docs), "likelihood": likelihood}
    )
    trials = [RulerTrial(task=r.task, length=r.length, trial=r.trial, score=r.score) for r in res.records]
    return EvalOutcome(
        metric,
        {
            ctx.out_dir / CELLS_CSV: (RulerCell, metric.by_task),
            ctx.out_dir / TRIALS_CSV: (RulerTrial, trials),
            **choices,
        },
        data_hash=docs.manifest.set_sha256[:12],
        settings_extra={"lengths_used": lengths},
    )


def ruler_items(ctx: EvalContext, texts: Sequence[str], records: Sequence[Any]) -> list[Any]:
    """The RULER-style examples (regenerated from their seeds, identical to the ones generated) as likelihood
    items, when eval.retrieval_choices asks; multi-value answers in the order the text gives them."""

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
