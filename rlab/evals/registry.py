"""The evals `rlab eval` can run, by name: each adapts one pure eval function to an `EvalContext`.

    EVALS = {"bpb": ..., "bpb_length": ..., "core": ..., "passkey": ..., "ruler": ...}

An adapter takes everything from the context (model, tokenizer, settings, paths), calls the pure
function in its module, and returns an `EvalOutcome`: its section of eval.json (a `rlab.records`
model), the CSV tables it owns (rows of `rlab.records` models), its BPB units (for bpb_units.csv) and
a hash of the data it scored. Adding an eval is one adapter here, its name in
`rlab.spec.eval.EvalName`, its section model in `rlab.records.EvalMetrics` and its files in
`rlab.evals.outputs.SECTION_FILES`.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlab import records as rec
from rlab.core.checkpoint_meta import CheckpointMeta
from rlab.errors import EvalError, unknown_name_error
from rlab.evals import outputs
from rlab.evals.progress import ProgressFn, stages
from rlab.spec.eval import EvalSpec

log = logging.getLogger(__name__)

Table = tuple[type[rec.Record], Sequence[rec.Record]]
"""A CSV: its row model (whose `columns` it has) and its rows."""


@dataclass
class EvalContext:
    """What every eval gets: the loaded model and tokenizer, settings, paths and ranks."""

    model: Any
    tokenizer: Any
    meta: CheckpointMeta
    spec: EvalSpec
    device: Any
    base_dir: Path
    out_dir: Path
    core_csv: Path
    token_bytes: Any
    name: str = "model"
    """Label for errors and logs, e.g. 'd20-pi step 21400'."""
    rank: int = 0
    world_size: int = 1
    autocast: Callable[[], AbstractContextManager] = nullcontext
    shared: dict[str, Any] = field(default_factory=dict)
    """What several evals of one worker share (the long-document set)."""
    progress: ProgressFn | None = None
    """The running eval's progress callback (`rlab.evals.progress`; the runner sets one per eval)."""

    @property
    def train_seq_len(self) -> int:
        return self.meta.sequence_len

    @property
    def original_len(self) -> int:
        """L0: the base's training length (every variant's RoPE config records it)."""
        return int(self.model.rope.original_len or self.train_seq_len)

    @property
    def target_len(self) -> int:
        """T: the continued-training length (eval.target_len; the tag's own training length when unset)."""
        return int(self.spec.target_len or self.train_seq_len)

    @property
    def batch_tokens(self) -> int:
        """Tokens per forward pass: device_batch_size sequences of the training length."""
        return self.spec.device_batch_size * self.train_seq_len


@dataclass
class EvalOutcome:
    metric: rec.Record
    """This eval's section of eval.json."""
    tables: dict[Path, Table] = field(default_factory=dict)
    units: list[rec.BpbUnit] = field(default_factory=list)
    data_hash: str | None = None
    """What was scored (see `rlab.records.SectionRun.data_hash`)."""
    settings_extra: dict[str, Any] = field(default_factory=dict)
    """Facts of this run that change what the section measures (e.g. the BPB window), hashed with its settings."""


BPB_CONVENTION = (
    "whole documents chosen before the run (seeded order of the split's pool, taken whole until the token "
    "budget; recorded in bpb_docs.csv), each scored once in windows of the training length; "
    "nats and bytes summed per document, then over documents; independent of world size and batch size"
)


def run_bpb(ctx: EvalContext) -> EvalOutcome:
    """Train and val BPB, each over a fixed set of whole documents of about `bpb_tokens` targets."""
    from rlab.evals.bpb.doc_set import select_documents
    from rlab.evals.bpb.score import score_documents
    from rlab.paths import BaseLayout

    T = ctx.train_seq_len
    splits: dict[str, rec.BpbSplit] = {}
    units: list[rec.BpbUnit] = []
    docs_rows: list[rec.BpbDoc] = []
    hashes = {}
    doc_sets = {
        split: select_documents(
            BaseLayout(ctx.base_dir).data_dir, ctx.tokenizer, split, ctx.spec.bpb_tokens, ctx.spec.seed
        )
        for split in ("train", "val")
    }
    parts = stages(ctx.progress, [d.targets for d in doc_sets.values()])  # target tokens
    for (split, doc_set), part in zip(doc_sets.items(), parts):
        if doc_set.whole_split:
            log.warning(
                "%s split: the budget of %d tokens exceeds its %d documents (%d targets): every document "
                "is scored once",
                split,
                ctx.spec.bpb_tokens,
                doc_set.pool_docs,
                doc_set.targets,
            )
        with ctx.autocast():
            res = score_documents(
                ctx.model, [d.tokens for d in doc_set.docs], T, ctx.token_bytes, ctx.batch_tokens, part
            )
        splits[split] = rec.BpbSplit(
            bpb=res.bpb,
            nats=res.nats,
            bytes=int(res.bytes),
            tokens=res.tokens,
            docs=len(doc_set.docs),
            docs_available=doc_set.pool_docs,
            token_budget=ctx.spec.bpb_tokens,
            whole_split=doc_set.whole_split,
            window=T,
        )
        units += [
            rec.BpbUnit(section="bpb", metric=split, unit=d.id, doc=d.id, nats=n, bytes=int(b), tokens=t)
            for d, (n, b, t) in zip(doc_set.docs, res.units, strict=True)
        ]
        docs_rows += [
            rec.BpbDoc(split=split, doc=d.id, sha256=d.sha256, tokens=len(d.tokens)) for d in doc_set.docs
        ]
        hashes[split] = doc_set.data_hash
        log.info(
            "%s BPB %s: %.4f over %d tokens of %d whole documents%s",
            ctx.name,
            split,
            res.bpb,
            res.tokens,
            len(doc_set.docs),
            " (the whole split)" if doc_set.whole_split else "",
        )
    return EvalOutcome(
        rec.BpbMetric(convention=BPB_CONVENTION, **splits),
        tables={ctx.out_dir / outputs.BPB_DOCS_CSV: (rec.BpbDoc, docs_rows)},
        units=units,
        data_hash=rec.short_hash(hashes),
        settings_extra={"window": T},
    )


def eval_lengths(ctx: EvalContext) -> list[int]:
    """The experiment's eval lengths (`rlab.evals.lengths`): L0 = the base's training length (every tag's
    RoPE config records it), T = eval.target_len (the continued-training length)."""
    from rlab.evals.lengths import eval_lengths as resolve

    return resolve(ctx.spec, ctx.original_len, ctx.target_len)


def long_docs(ctx: EvalContext):
    """The base dir's long-document set (`rlab.data.long_docs`), built on first use, loaded once per worker."""
    if "long_docs" not in ctx.shared:
        import torch.distributed as dist

        from rlab.data.long_docs import ensure_long_docs, load_long_docs
        from rlab.errors import RlabError
        from rlab.evals.lengths import longest_bpb_length

        failure: list = [None]
        if ctx.rank == 0:
            try:
                manifest, built = ensure_long_docs(ctx.base_dir, longest_bpb_length(ctx.spec, ctx.target_len))
                if built:
                    log.warning(
                        "built the long-document set of %s: %d documents, %d tokens",
                        ctx.base_dir,
                        len(manifest.docs),
                        manifest.total_tokens,
                    )
            except RlabError as exc:
                failure = [(type(exc), exc.message, exc.hint)]
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            dist.broadcast_object_list(failure, src=0)  # also the barrier: the set is complete after it
        if failure[0] is not None:
            cls, message, hint = failure[0]
            raise cls(message, hint)
        ctx.shared["long_docs"] = load_long_docs(ctx.base_dir)
    return ctx.shared["long_docs"]


def _encode_docs(ctx: EvalContext, docs, indices, bos: bool) -> dict[int, list[int]]:
    """Tokens of the chosen documents of the set (BOS first when `bos`), checked against the manifest."""
    texts = [docs.texts[i] for i in indices]
    encoded = (
        ctx.tokenizer.encode(texts, prepend=ctx.tokenizer.bos_token_id)
        if bos
        else ctx.tokenizer.encode(texts)
    )
    out = {}
    for i, ids in zip(indices, encoded):
        expected = docs.manifest.docs[i].tokens + (1 if bos else 0)
        if len(ids) != expected:
            raise EvalError(
                f"Long document {docs.manifest.docs[i].doc_id} has {len(ids)} tokens, its manifest says "
                f"{expected}.",
                "Rebuild the set with `rlab data long-docs --force`.",
            )
        out[i] = ids
    return out


def _long_docs_summary(docs) -> rec.LongDocsSummary:
    return rec.LongDocsSummary.model_validate(docs.manifest.summary())


def run_bpb_length(ctx: EvalContext) -> EvalOutcome:
    """BPB vs context length on the long-document set: same targets at every length (rlab.evals.bpb_length.same_targets),
    or YaRN's sliding-window perplexity (rlab.evals.bpb_length.sliding) with eval.ppl_protocol."""
    docs = long_docs(ctx)
    lengths = eval_lengths(ctx)
    if ctx.spec.ppl_protocol != "same_targets":
        return _run_sliding(ctx, docs, lengths)
    from rlab.evals.bpb_length.same_targets import plan_blocks, score_plan

    ids = docs.doc_ids
    plan = plan_blocks(
        [d.tokens + 1 for d in docs.manifest.docs], lengths, ctx.spec.length_tokens, ctx.spec.length_block
    )
    tokens = _encode_docs(ctx, docs, plan.used_docs, bos=True)
    with ctx.autocast():
        metric, raw = score_plan(ctx.model, plan, tokens, ctx.token_bytes, ctx.batch_tokens, ctx.progress)
    section = rec.BpbLengthMetric.model_validate({**metric, "long_docs": _long_docs_summary(docs)})
    units = [
        rec.BpbUnit(
            section="bpb_length", metric=f"len_{L}", unit=str(i), doc=ids[d], nats=n, bytes=int(b), tokens=t
        )
        for L, res in raw.items()
        for i, ((n, b, t), d) in enumerate(zip(res.units, res.unit_docs, strict=True))
    ]
    return EvalOutcome(
        section,
        {ctx.out_dir / outputs.BPB_BY_LENGTH_CSV: (rec.LengthRow, section.lengths)},
        units,
        data_hash=docs.manifest.set_sha256[:12],
        settings_extra={"lengths_used": lengths},
    )


def _run_sliding(ctx: EvalContext, docs, lengths: list[int]) -> EvalOutcome:
    from rlab.evals.bpb_length.sliding import convention, evaluate_sliding

    truncate = ctx.spec.ppl_protocol == "truncated"
    need = max(lengths)
    chosen = [i for i, d in enumerate(docs.manifest.docs) if d.tokens >= need][: ctx.spec.ppl_docs]
    if not chosen:
        raise EvalError(
            f"No long document has the {need} tokens the {ctx.spec.ppl_protocol} protocol needs at "
            f"length {need}.",
            f"Rebuild the set with `rlab data long-docs --min-tokens {need} --force` "
            "and longer sources (--from), or use shorter lengths.",
        )
    if len(chosen) < ctx.spec.ppl_docs:
        log.warning(
            "%s perplexity: only %d documents have %d tokens (asked for %d)",
            ctx.spec.ppl_protocol,
            len(chosen),
            need,
            ctx.spec.ppl_docs,
        )
    tokens = _encode_docs(ctx, docs, chosen, bos=False)
    with ctx.autocast():
        results = evaluate_sliding(
            ctx.model,
            tokens,
            chosen,
            lengths,
            ctx.spec.ppl_stride,
            ctx.tokenizer.bos_token_id,
            ctx.token_bytes,
            ctx.batch_tokens,
            truncate=truncate,
            progress=ctx.progress,
        )
    ids = docs.doc_ids
    rows = [
        rec.LengthRow(length=r.length, bpb=r.bpb, tokens=r.tokens, docs=r.docs, ppl=r.ppl, windows=r.windows)
        for r in results
    ]
    section = rec.BpbLengthMetric(
        convention=convention(truncate, ctx.spec.ppl_stride, len(chosen), need),
        protocol=ctx.spec.ppl_protocol,
        longest=need,
        units=len(chosen),
        docs=len(chosen),
        stride=None if truncate else ctx.spec.ppl_stride,
        lengths=rows,
        long_docs=_long_docs_summary(docs),
    )
    units = [
        rec.BpbUnit(
            section="bpb_length",
            metric=f"len_{r.length}",
            unit=ids[d],
            doc=ids[d],
            nats=nats,
            bytes=int(nbytes),
            tokens=ntok,
        )
        for r in results
        for d, nats, nbytes, _, _, ntok in r.units
    ]
    return EvalOutcome(
        section,
        {ctx.out_dir / outputs.BPB_BY_LENGTH_CSV: (rec.LengthRow, rows)},
        units,
        data_hash=rec.short_hash([ids[i] for i in chosen] + [docs.manifest.set_sha256]),
        settings_extra={"lengths_used": lengths},
    )


def run_core(ctx: EvalContext) -> EvalOutcome:
    """DCLM CORE on the bundle (partial when task files are missing), on eval.core_tasks when set."""
    from rlab.evals.core.bundle import bundle_root, load_bundle, select_tasks
    from rlab.evals.core.metric import evaluate_core

    bundle = load_bundle(bundle_root(ctx.base_dir, ctx.spec.core_bundle))
    labels = select_tasks(bundle, ctx.spec.core_tasks)
    with ctx.autocast():
        res = evaluate_core(
            ctx.model,
            ctx.tokenizer,
            bundle,
            ctx.device,
            max_per_task=ctx.spec.max_per_task,
            max_seq_len=ctx.train_seq_len,
            batch_tokens=ctx.batch_tokens,
            fewshot_seed=ctx.spec.seed,
            labels=labels,
            progress=ctx.progress,
        )
    metric = rec.CoreMetric.model_validate(res.metrics())
    # Arms at different context lengths measure CORE alike unless some prompt had to be cropped: the
    # context it was cropped to (None: none was) goes into the settings the report compares.
    cropped_to = ctx.train_seq_len if res.cropped() else None
    examples = [
        rec.CoreExample(task=t.task.label, index=idx, correct=int(ok))
        for t in res.tasks
        for idx, ok in zip(t.source_indices, t.correct)
    ]
    per_task = [
        rec.CoreTaskRow(
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
        ctx.out_dir / outputs.CORE_EXAMPLES_CSV: (rec.CoreExample, examples),
        ctx.core_csv: (rec.CoreTaskRow, per_task),
    }
    log.info("%s %s %.4f%s", ctx.name, metric.label, metric.core, " (partial)" if metric.partial else "")
    return EvalOutcome(
        metric,
        tables,
        data_hash=rec.short_hash([[e.task, e.index] for e in examples] + [bundle_fingerprint(bundle)]),
        settings_extra={"cropped_to": cropped_to, **({"core_tasks": labels} if labels is not None else {})},
    )


def run_passkey(ctx: EvalContext) -> EvalOutcome:
    """Passkey retrieval accuracy per (length, depth), one random key per trial (rlab.evals.passkey.task)."""
    from rlab.core.engine import Engine
    from rlab.evals.passkey.task import evaluate_passkey

    lengths = list(ctx.spec.passkey_lengths or eval_lengths(ctx))
    with ctx.autocast():
        res = evaluate_passkey(
            Engine(ctx.model, name=ctx.name),
            ctx.tokenizer,
            lengths,
            ctx.spec.passkey_depths,
            ctx.spec.passkey_trials,
            ctx.spec.seed,
            ctx.device,
            ctx.batch_tokens,
            ctx.progress,
        )
    from rlab.evals.retrieval.adapters import passkey_items, score_likelihood

    likelihood, choices = score_likelihood(ctx, passkey_items(ctx, res.records), outputs.PASSKEY_CHOICES_CSV)
    metric = rec.PasskeyMetric.model_validate({**res.metrics(), "likelihood": likelihood})
    trials = [
        rec.PasskeyTrial(length=r.length, depth=r.depth, trial=r.trial, key=r.key, correct=int(r.correct))
        for r in res.records
    ]
    return EvalOutcome(
        metric,
        {
            ctx.out_dir / outputs.PASSKEY_CSV: (rec.PasskeyCell, metric.cells),
            ctx.out_dir / outputs.PASSKEY_TRIALS_CSV: (rec.PasskeyTrial, trials),
            **choices,
        },
        settings_extra={"lengths_used": lengths},
    )


def run_ruler(ctx: EvalContext) -> EvalOutcome:
    """RULER-style synthetic tasks (rlab.evals.ruler.tasks), haystack from the long-document set."""
    from rlab.core.engine import Engine
    from rlab.evals.ruler.tasks import evaluate_ruler

    docs = long_docs(ctx)
    lengths = list(ctx.spec.ruler_lengths or eval_lengths(ctx))
    with ctx.autocast():
        res = evaluate_ruler(
            Engine(ctx.model, name=ctx.name),
            ctx.tokenizer,
            docs.texts,
            ctx.spec.ruler_tasks,
            lengths,
            ctx.spec.ruler_trials,
            ctx.spec.seed,
            ctx.device,
            ctx.batch_tokens,
            ctx.progress,
        )
    from rlab.evals.retrieval.adapters import ruler_items, score_likelihood

    likelihood, choices = score_likelihood(
        ctx, ruler_items(ctx, docs.texts, res.records), outputs.RULER_CHOICES_CSV
    )
    metric = rec.RulerMetric.model_validate(
        {**res.metrics(), "long_docs": _long_docs_summary(docs), "likelihood": likelihood}
    )
    trials = [rec.RulerTrial(task=r.task, length=r.length, trial=r.trial, score=r.score) for r in res.records]
    return EvalOutcome(
        metric,
        {
            ctx.out_dir / outputs.RULER_CSV: (rec.RulerCell, metric.by_task),
            ctx.out_dir / outputs.RULER_TRIALS_CSV: (rec.RulerTrial, trials),
            **choices,
        },
        data_hash=docs.manifest.set_sha256[:12],
        settings_extra={"lengths_used": lengths},
    )


def run_copy_distance(ctx: EvalContext) -> EvalOutcome:
    """Loss on a passage repeated at a known distance vs the same passage unseen, by window (rlab.evals.copy_distance.task)."""
    from rlab.evals.copy_distance import task as cd

    docs = ctx.tokenizer.encode(long_docs(ctx).texts)
    windows = list(ctx.spec.copy_lengths or eval_lengths(ctx))
    with ctx.autocast():
        rows = cd.evaluate_copy_distance(
            ctx.model,
            docs,
            ctx.tokenizer.bos_token_id,
            windows,
            ctx.spec.copy_trials,
            ctx.spec.seed,
            ctx.batch_tokens,
            ctx.device,
            progress=ctx.progress,
        )
    windows_summary = [
        rec.CopyWindow(**{k: w[k] for k in rec.CopyWindow.model_fields}) for w in cd.summarize(rows)
    ]
    metric = rec.CopyDistanceMetric(
        passage=cd.PASSAGE, prefix=cd.PREFIX, windows=windows_summary, nested=True
    )
    table = [rec.CopyRow(**r) for r in rows]
    return EvalOutcome(
        metric,
        {ctx.out_dir / outputs.COPY_DISTANCE_CSV: (rec.CopyRow, table)},
        settings_extra={"windows_used": windows, "records": "nested"},
    )


EVALS: dict[str, Callable[[EvalContext], EvalOutcome]] = {
    "bpb": run_bpb,
    "bpb_length": run_bpb_length,
    "core": run_core,
    "passkey": run_passkey,
    "ruler": run_ruler,
    "copy_distance": run_copy_distance,
}


def bundle_fingerprint(bundle) -> str:
    """Hash of the CORE tasks scored: their configuration and the bytes of their data files."""
    import hashlib

    return rec.short_hash(
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


def get_eval(name: str) -> Callable[[EvalContext], EvalOutcome]:
    """The adapter for `name`, or `Unknown eval 'cor'. Did you mean 'core'? Available: ...`."""
    try:
        return EVALS[name]
    except KeyError:
        raise unknown_name_error("eval", name, EVALS, EvalError) from None


def release_memory() -> None:
    """Drop what an eval left behind so memory does not grow eval after eval."""
    gc.collect()
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
