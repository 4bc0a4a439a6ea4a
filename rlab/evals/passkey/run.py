"""Passkey as `rlab eval` runs it: generation over (length, depth, trial) and the same prompts scored by
likelihood (`rlab.evals.retrieval`) from the same prefill, paired by trial."""

from __future__ import annotations

from rlab.evals.context import EvalContext, EvalOutcome
from rlab.evals.passkey import CELLS_CSV, CHOICES_CSV, TRIALS_CSV
from rlab.evals.passkey.records import PasskeyCell, PasskeyMetric, PasskeyTrial
from rlab.evals.passkey.settings import PasskeySettings
from rlab.evals.passkey.task import evaluate_passkey
from rlab.evals.retrieval.adapters import generation, likelihood_outputs


def run(ctx: EvalContext) -> EvalOutcome:
    """Passkey retrieval accuracy per (length, depth), one random key per trial (rlab.evals.passkey.task)."""

    settings = PasskeySettings.of(ctx.spec)
    lengths = list(settings.passkey_lengths or ctx.eval_lengths())
    with ctx.autocast():
        res = evaluate_passkey(
            generation(ctx),
            lengths,
            settings.passkey_depths,
            settings.passkey_trials,
            ctx.spec.seed,
            choices=ctx.spec.retrieval_choices,
        )
    likelihood, choices = likelihood_outputs(ctx, res.choices, CHOICES_CSV)
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
