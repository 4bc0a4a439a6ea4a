"""Passkey as `rlab eval` runs it: generation over (length, depth, trial), then the same prompts scored by
likelihood (`rlab.evals.retrieval`), paired by trial."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlab.core.engine import Engine
from rlab.evals.context import EvalContext, EvalOutcome
from rlab.evals.passkey import CELLS_CSV, CHOICES_CSV, TRIALS_CSV
from rlab.evals.passkey.records import PasskeyCell, PasskeyMetric, PasskeyTrial
from rlab.evals.passkey.settings import PasskeySettings
from rlab.evals.passkey.task import build_prompt, evaluate_passkey
from rlab.evals.retrieval.adapters import score_likelihood
from rlab.evals.retrieval.likelihood import make_item


def run(ctx: EvalContext) -> EvalOutcome:
    """Passkey retrieval accuracy per (length, depth), one random key per trial (rlab.evals.passkey.task)."""

    settings = PasskeySettings.of(ctx.spec)
    lengths = list(settings.passkey_lengths or ctx.eval_lengths())
    with ctx.autocast():
        res = evaluate_passkey(
            Engine(ctx.model, name=ctx.name),
            ctx.tokenizer,
            lengths,
            settings.passkey_depths,
            settings.passkey_trials,
            ctx.spec.seed,
            ctx.device,
            ctx.batch_tokens,
            ctx.progress,
        )
    likelihood, choices = score_likelihood(ctx, passkey_items(ctx, res.records), CHOICES_CSV)
    metric = PasskeyMetric.model_validate({**res.metrics(), "likelihood": likelihood})
    trials = [
        PasskeyTrial(length=r.length, depth=r.depth, trial=r.trial, key=r.key, correct=int(r.correct))
        for r in res.records
    ]
    return EvalOutcome(
        metric,
        {
            ctx.out_dir / CELLS_CSV: (PasskeyCell, metric.cells),
            ctx.out_dir / TRIALS_CSV: (PasskeyTrial, trials),
            **choices,
        },
        settings_extra={"lengths_used": lengths},
    )


def passkey_items(ctx: EvalContext, records: Sequence[Any]) -> list[Any]:
    """The passkey trials as likelihood items (the same prompts and keys), when eval.retrieval_choices asks."""

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
