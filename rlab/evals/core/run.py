"""CORE as `rlab eval` runs it: the bundle's tasks (or eval.core_tasks) scored, per-example verdicts and per-task
accuracies written, the scored examples and task files hashed."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from rlab.evals.context import EvalContext, EvalOutcome, Table
from rlab.evals.core import EXAMPLES_CSV
from rlab.evals.core.bundle import CoreBundle, bundle_root, load_bundle, select_tasks
from rlab.evals.core.metric import evaluate_core
from rlab.evals.core.records import CoreExample, CoreMetric, CoreTaskRow
from rlab.evals.core.settings import CoreSettings
from rlab.records.base import short_hash

log = logging.getLogger(__name__)


def run(ctx: EvalContext) -> EvalOutcome:
    """DCLM CORE on the bundle (partial when task files are missing), on eval.core_tasks when set."""

    settings = CoreSettings.of(ctx.spec)
    bundle = load_bundle(bundle_root(ctx.base_dir, settings.core_bundle))
    labels = select_tasks(bundle, settings.core_tasks)
    with ctx.autocast():
        res = evaluate_core(
            ctx.model,
            ctx.tokenizer,
            bundle,
            ctx.device,
            max_per_task=settings.max_per_task,
            max_seq_len=ctx.train_seq_len,
            batch_tokens=ctx.batch_tokens,
            fewshot_seed=ctx.spec.seed,
            labels=labels,
            progress=ctx.progress,
        )
    metric = CoreMetric.model_validate(res.metrics())
    # Arms at different context lengths measure CORE alike unless some prompt had to be cropped: the
    # context it was cropped to (None: none was) goes into the settings the report compares.
    cropped_to = ctx.train_seq_len if res.cropped() else None
    examples = [
        CoreExample(task=t.task.label, index=idx, correct=int(ok))
        for t in res.tasks
        for idx, ok in zip(t.source_indices, t.correct)
    ]
    per_task = [
        CoreTaskRow(
            task=t.task.label,
            type=t.task.task_type,
            accuracy=t.accuracy,
            centered=t.centered,
            baseline=0.01 * t.task.baseline,
            n=t.n,
        )
        for t in res.tasks
    ]
    tables: dict[Path, Table] = {
        ctx.out_dir / EXAMPLES_CSV: (CoreExample, examples),
        ctx.variant_csv: (CoreTaskRow, per_task),
    }
    log.info("%s %s %.4f%s", ctx.name, metric.label, metric.core, " (partial)" if metric.partial else "")
    return EvalOutcome(
        metric,
        tables,
        data_hash=short_hash([[e.task, e.index] for e in examples] + [bundle_fingerprint(bundle)]),
        settings_extra={"cropped_to": cropped_to, **({"core_tasks": labels} if labels is not None else {})},
    )


def bundle_fingerprint(bundle: CoreBundle) -> str:
    """Hash of the CORE tasks scored: their configuration and the bytes of their data files."""

    return short_hash(
        [
            [
                t.label,
                t.dataset_uri,
                t.task_type,
                t.num_fewshot,
                t.continuation_delimiter,
                t.baseline,
                hashlib.sha256(t.path.read_bytes()).hexdigest(),
            ]
            for t in bundle.tasks
        ]
    )
