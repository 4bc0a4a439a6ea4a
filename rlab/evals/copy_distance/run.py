"""Copy by distance as `rlab eval` runs it: records built from the long-document set at every window, scored
against their controls, summarised per window."""

from __future__ import annotations

from rlab.evals import long_doc_set
from rlab.evals.context import EvalContext, EvalOutcome
from rlab.evals.copy_distance import CSV
from rlab.evals.copy_distance import task as cd
from rlab.evals.copy_distance.records import CopyDistanceMetric, CopyRow, CopyWindow
from rlab.evals.copy_distance.settings import CopyDistanceSettings


def run(ctx: EvalContext) -> EvalOutcome:
    """Loss on a passage repeated at a known distance vs the same passage unseen, by window (rlab.evals.copy_distance.task)."""
    docs = ctx.tokenizer.encode(long_doc_set.load(ctx).texts)
    settings = CopyDistanceSettings.of(ctx.spec)
    windows = list(settings.copy_lengths or ctx.eval_lengths())
    with ctx.autocast():
        rows = cd.evaluate_copy_distance(
            ctx.model,
            docs,
            ctx.tokenizer.bos_token_id,
            windows,
            settings.copy_trials,
            ctx.spec.seed,
            ctx.batch_tokens,
            ctx.device,
            progress=ctx.progress,
        )
    windows_summary = [CopyWindow(**{k: w[k] for k in CopyWindow.model_fields}) for w in cd.summarize(rows)]
    metric = CopyDistanceMetric(passage=cd.PASSAGE, prefix=cd.PREFIX, windows=windows_summary, nested=True)
    table = [CopyRow(**r) for r in rows]
    return EvalOutcome(
        metric,
        {ctx.out_dir / CSV: (CopyRow, table)},
        settings_extra={"windows_used": windows, "records": "nested"},
    )
