"""BPB vs context length as `rlab eval` runs it, on the long-document set: same targets at every length
(`same_targets`), or YaRN's sliding-window / truncated perplexity (`sliding`) with eval.ppl_protocol."""

from __future__ import annotations

import logging

from rlab.data.long_docs import LongDocsSet
from rlab.errors import EvalError
from rlab.evals import long_doc_set
from rlab.evals.bpb_length import BY_LENGTH_CSV, TARGETS_CSV
from rlab.evals.bpb_length.records import BpbLengthMetric, LengthRow, TargetLoss
from rlab.evals.bpb_length.same_targets import bigram_repeats, plan_blocks, score_plan
from rlab.evals.bpb_length.settings import BpbLengthSettings
from rlab.evals.bpb_length.sliding import convention, evaluate_sliding
from rlab.evals.context import EvalContext, EvalOutcome
from rlab.records.base import short_hash
from rlab.records.units import BpbUnit

log = logging.getLogger(__name__)


def run(ctx: EvalContext) -> EvalOutcome:
    """BPB at each eval length, over the long-document set."""
    docs = long_doc_set.load(ctx)
    lengths = ctx.eval_lengths()
    settings = BpbLengthSettings.of(ctx.spec)
    if settings.ppl_protocol != "same_targets":
        return _run_sliding(ctx, settings, docs, lengths)

    ids = docs.doc_ids
    plan = plan_blocks(
        [d.tokens + 1 for d in docs.manifest.docs], lengths, settings.length_tokens, settings.length_block
    )
    tokens = long_doc_set.encode(ctx, docs, plan.used_docs, bos=True)
    keep = settings.length_target_losses
    with ctx.autocast():
        metric, raw = score_plan(
            ctx.model, plan, tokens, ctx.token_bytes, ctx.batch_tokens, ctx.progress, keep
        )
    section = BpbLengthMetric.model_validate({**metric, "long_docs": long_doc_set.summary(docs)})
    units = [
        BpbUnit(
            section="bpb_length", metric=f"len_{L}", unit=str(i), doc=ids[d], nats=n, bytes=int(b), tokens=t
        )
        for L, res in raw.items()
        for i, ((n, b, t), d) in enumerate(zip(res.units, res.unit_docs, strict=True))
    ]
    tables: dict = {ctx.out_dir / BY_LENGTH_CSV: (LengthRow, section.lengths)}
    if keep:
        tables[ctx.out_dir / TARGETS_CSV] = (TargetLoss, _target_rows(plan, tokens, raw, ctx.token_bytes))
    return EvalOutcome(
        section,
        tables,
        units,
        data_hash=docs.manifest.set_sha256[:12],
        settings_extra={"lengths_used": lengths},
    )


def _target_rows(plan, tokens, raw, token_bytes) -> list[TargetLoss]:
    """Every scored target at every length: block, position, token, bytes, bigram repeat distance, nats."""

    nbytes = token_bytes.tolist()
    repeats = {d: bigram_repeats(tokens[d]) for d in plan.used_docs}
    rows = []
    for length, res in raw.items():
        for i, (block, nats) in enumerate(zip(plan.blocks, res.target_nats, strict=True)):
            first = block.end - plan.block + 1
            for p, n in enumerate(nats):
                tok = tokens[block.doc][first + p]
                rows.append(
                    TargetLoss(
                        length=length,
                        unit=str(i),
                        position=p,
                        token=tok,
                        bytes=int(nbytes[tok]),
                        repeat=repeats[block.doc][first + p],
                        nats=round(n, 5),
                    )
                )
    return rows


def _run_sliding(
    ctx: EvalContext, settings: BpbLengthSettings, docs: LongDocsSet, lengths: list[int]
) -> EvalOutcome:

    truncate = settings.ppl_protocol == "truncated"
    need = max(lengths)
    chosen = [i for i, d in enumerate(docs.manifest.docs) if d.tokens >= need][: settings.ppl_docs]
    if not chosen:
        raise EvalError(
            f"No long document has the {need} tokens the {settings.ppl_protocol} protocol needs at "
            f"length {need}.",
            f"Rebuild the set with `rlab data long-docs --min-tokens {need} --force` "
            "and longer sources (--from), or use shorter lengths.",
        )
    if len(chosen) < settings.ppl_docs:
        log.warning(
            "%s perplexity: only %d documents have %d tokens (asked for %d)",
            settings.ppl_protocol,
            len(chosen),
            need,
            settings.ppl_docs,
        )
    tokens = long_doc_set.encode(ctx, docs, chosen, bos=False)
    with ctx.autocast():
        results = evaluate_sliding(
            ctx.model,
            tokens,
            chosen,
            lengths,
            settings.ppl_stride,
            ctx.tokenizer.bos_token_id,
            ctx.token_bytes,
            ctx.batch_tokens,
            truncate=truncate,
            progress=ctx.progress,
        )
    ids = docs.doc_ids
    rows = [
        LengthRow(length=r.length, bpb=r.bpb, tokens=r.tokens, docs=r.docs, ppl=r.ppl, windows=r.windows)
        for r in results
    ]
    section = BpbLengthMetric(
        convention=convention(truncate, settings.ppl_stride, len(chosen), need),
        protocol=settings.ppl_protocol,
        longest=need,
        units=len(chosen),
        docs=len(chosen),
        stride=None if truncate else settings.ppl_stride,
        lengths=rows,
        long_docs=long_doc_set.summary(docs),
    )
    units = [
        BpbUnit(
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
        {ctx.out_dir / BY_LENGTH_CSV: (LengthRow, rows)},
        units,
        data_hash=short_hash([ids[i] for i in chosen] + [docs.manifest.set_sha256]),
        settings_extra={"lengths_used": lengths},
    )
