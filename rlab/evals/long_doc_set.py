"""The long-document set as the evals read it (`rlab.data.long_docs` builds and checks it): built once by rank 0
when missing, loaded once per worker, its documents encoded and checked against the manifest."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rlab.data.long_docs import ensure_long_docs, load_long_docs
from rlab.errors import EvalError, RlabError
from rlab.evals.context import EvalContext
from rlab.evals.lengths import longest_bpb_length
from rlab.records.sections import LongDocsSummary

if TYPE_CHECKING:
    from rlab.data.long_docs import LongDocsSet

log = logging.getLogger(__name__)


def load(ctx: EvalContext) -> LongDocsSet:
    """The base dir's long-document set (`rlab.data.long_docs`), built on first use, loaded once per worker."""
    if "long_docs" not in ctx.shared:
        import torch.distributed as dist

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
    loaded: LongDocsSet = ctx.shared["long_docs"]
    return loaded


def encode(ctx: EvalContext, docs: LongDocsSet, indices: Sequence[int], bos: bool) -> dict[int, list[int]]:
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


def summary(docs: LongDocsSet) -> LongDocsSummary:
    """The set's summary a section records (`LongDocsSummary`)."""
    return LongDocsSummary.model_validate(docs.manifest.summary())
