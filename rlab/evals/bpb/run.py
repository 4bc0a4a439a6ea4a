"""Train and val BPB as `rlab eval` runs it: each split's fixed document set scored, one unit per document."""

from __future__ import annotations

import logging

from rlab.evals.bpb import DOCS_CSV
from rlab.evals.bpb.doc_set import select_documents
from rlab.evals.bpb.records import BpbDoc, BpbMetric, BpbSplit
from rlab.evals.bpb.score import score_documents
from rlab.evals.bpb.settings import BpbSettings
from rlab.evals.context import EvalContext, EvalOutcome
from rlab.evals.progress import stages
from rlab.paths import BaseLayout
from rlab.records.base import short_hash
from rlab.records.units import BpbUnit

log = logging.getLogger(__name__)

CONVENTION = (
    "whole documents chosen before the run (seeded order of the split's pool, taken whole until the token "
    "budget; recorded in bpb_docs.csv), each scored once in windows of the training length; "
    "nats and bytes summed per document, then over documents; independent of world size and batch size"
)


def run(ctx: EvalContext) -> EvalOutcome:
    """Train and val BPB, each over a fixed set of whole documents of about `bpb_tokens` targets."""

    T = ctx.train_seq_len
    budget = BpbSettings.of(ctx.spec).bpb_tokens
    splits: dict[str, BpbSplit] = {}
    units: list[BpbUnit] = []
    docs_rows: list[BpbDoc] = []
    hashes = {}
    doc_sets = {
        split: select_documents(
            BaseLayout(ctx.base_dir).data_dir, ctx.tokenizer, split, budget, ctx.spec.seed
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
                budget,
                doc_set.pool_docs,
                doc_set.targets,
            )
        with ctx.autocast():
            res = score_documents(
                ctx.model, [d.tokens for d in doc_set.docs], T, ctx.token_bytes, ctx.batch_tokens, part
            )
        splits[split] = BpbSplit(
            bpb=res.bpb,
            nats=res.nats,
            bytes=int(res.bytes),
            tokens=res.tokens,
            docs=len(doc_set.docs),
            docs_available=doc_set.pool_docs,
            token_budget=budget,
            whole_split=doc_set.whole_split,
            window=T,
        )
        units += [
            BpbUnit(section="bpb", metric=split, unit=d.id, doc=d.id, nats=n, bytes=int(b), tokens=t)
            for d, (n, b, t) in zip(doc_set.docs, res.units, strict=True)
        ]
        docs_rows += [
            BpbDoc(split=split, doc=d.id, sha256=d.sha256, tokens=len(d.tokens)) for d in doc_set.docs
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
        BpbMetric(convention=CONVENTION, **splits),
        tables={ctx.out_dir / DOCS_CSV: (BpbDoc, docs_rows)},
        units=units,
        data_hash=short_hash(hashes),
        settings_extra={"window": T},
    )
