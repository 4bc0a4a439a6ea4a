"""The evals `rlab eval` can run, by name: each adapts one pure eval function to an `EvalContext`.

    EVALS = {"bpb": ..., "bpb_length": ..., "core": ..., "passkey": ..., "ruler": ...}

An adapter takes everything from the context (model, tokenizer, settings, paths), calls the pure
function in its module, and returns an `EvalOutcome`: the metric object for eval.json, the CSV
tables it owns, and its BPB units (for bpb_units.csv). Adding an eval is one adapter here plus
its name in `rlab.spec.eval.EvalName`.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlab.errors import EvalError, unknown_name_error
from rlab.evals import outputs
from rlab.spec.eval import EvalSpec

log = logging.getLogger(__name__)

Table = tuple[Sequence[str], list[Sequence[Any]]]


@dataclass
class EvalContext:
    """What every eval gets: the loaded model and tokenizer, settings, paths and ranks."""

    model: Any
    tokenizer: Any
    meta: dict
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

    @property
    def train_seq_len(self) -> int:
        return int(self.meta["model_config"]["sequence_len"])

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
    metric: dict
    tables: dict[Path, Table] = field(default_factory=dict)
    units: list[tuple[str, int, str, float, float]] = field(default_factory=list)
    """(metric, unit, doc, nats, bytes) rows for bpb_units.csv; doc = the unit's cluster (its document)."""


def run_bpb(ctx: EvalContext) -> EvalOutcome:
    """Train and val BPB over `bpb_tokens` tokens each (nanochat's definition)."""
    from rlab.core.data import TokenLoader
    from rlab.evals.bpb import evaluate_bpb
    from rlab.paths import BaseLayout

    B, T = ctx.spec.device_batch_size, ctx.train_seq_len
    steps = max(1, ctx.spec.bpb_tokens // (B * T * ctx.world_size))
    metric, units = {}, []
    for split in ("train", "val"):
        loader = TokenLoader(
            BaseLayout(ctx.base_dir).data_dir, ctx.tokenizer, split, B, T,
            rank=ctx.rank, world_size=ctx.world_size, device=ctx.device, seed=ctx.spec.seed,
        )
        try:
            with ctx.autocast():
                res = evaluate_bpb(ctx.model, loader, steps, ctx.token_bytes)
        finally:
            loader.close()
        metric[split] = res.summary()
        units += [(split, i, f"{split}_batch_{i}", n, b) for i, (n, b) in enumerate(res.units)]
        log.info("%s BPB %s: %.4f over %d tokens", ctx.name, split, res.bpb, res.tokens)
    return EvalOutcome(metric, units=units)


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
                    log.warning("built the long-document set of %s: %d documents, %d tokens", ctx.base_dir,
                                len(manifest.docs), manifest.total_tokens)
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
    encoded = ctx.tokenizer.encode(texts, prepend=ctx.tokenizer.bos_token_id) if bos else ctx.tokenizer.encode(texts)
    out = {}
    for i, ids in zip(indices, encoded):
        expected = docs.manifest.docs[i].tokens + (1 if bos else 0)
        if len(ids) != expected:
            raise EvalError(f"Long document {docs.manifest.docs[i].doc_id} has {len(ids)} tokens, its manifest says "
                            f"{expected}.", "Rebuild the set with `rlab data long-docs --force`.")
        out[i] = ids
    return out


def run_bpb_length(ctx: EvalContext) -> EvalOutcome:
    """BPB vs context length on the long-document set: same targets at every length (rlab.evals.bpb_length),
    or YaRN's sliding-window perplexity (rlab.evals.sliding_ppl) with eval.ppl_protocol."""
    docs = long_docs(ctx)
    lengths = eval_lengths(ctx)
    ids = docs.doc_ids
    if ctx.spec.ppl_protocol != "same_targets":
        return _run_sliding(ctx, docs, lengths)
    from rlab.evals.bpb_length import plan_blocks, score_plan

    plan = plan_blocks([d.tokens + 1 for d in docs.manifest.docs], lengths, ctx.spec.length_tokens,
                       ctx.spec.length_block)
    tokens = _encode_docs(ctx, docs, plan.used_docs, bos=True)
    with ctx.autocast():
        metric, raw = score_plan(ctx.model, plan, tokens, ctx.token_bytes, ctx.batch_tokens)
    metric["long_docs"] = docs.manifest.summary()
    rows = [[r[c] for c in outputs.BPB_BY_LENGTH_COLUMNS] for r in metric["lengths"]]
    units = [(f"len_{L}", i, ids[plan.blocks[i].doc], n, b) for L, res in raw.items()
             for i, (n, b) in enumerate(res.units)]
    return EvalOutcome(metric, {ctx.out_dir / outputs.BPB_BY_LENGTH_CSV: (outputs.BPB_BY_LENGTH_COLUMNS, rows)}, units)


def _run_sliding(ctx: EvalContext, docs, lengths: list[int]) -> EvalOutcome:
    from rlab.evals.sliding_ppl import convention, evaluate_sliding

    truncate = ctx.spec.ppl_protocol == "truncated"
    need = max(lengths)
    chosen = [i for i, d in enumerate(docs.manifest.docs) if d.tokens >= need][: ctx.spec.ppl_docs]
    if not chosen:
        raise EvalError(f"No long document has the {need} tokens the {ctx.spec.ppl_protocol} protocol needs at "
                        f"length {need}.", f"Rebuild the set with `rlab data long-docs --min-tokens {need} --force` "
                        "and longer sources (--from), or use shorter lengths.")
    if len(chosen) < ctx.spec.ppl_docs:
        log.warning("%s perplexity: only %d documents have %d tokens (asked for %d)", ctx.spec.ppl_protocol,
                    len(chosen), need, ctx.spec.ppl_docs)
    tokens = _encode_docs(ctx, docs, chosen, bos=False)
    with ctx.autocast():
        results = evaluate_sliding(ctx.model, tokens, chosen, lengths, ctx.spec.ppl_stride,
                                   ctx.tokenizer.bos_token_id, ctx.token_bytes, ctx.batch_tokens, truncate=truncate)
    ids = docs.doc_ids
    rows = [{"length": r.length, "bpb": r.bpb, "ci_low": r.bpb_low, "ci_high": r.bpb_high, "tokens": r.tokens,
             "docs": r.docs, "ppl": r.ppl, "ppl_ci_low": r.ppl_low, "ppl_ci_high": r.ppl_high, "windows": r.windows}
            for r in results]
    metric = {
        "protocol": ctx.spec.ppl_protocol,
        "convention": convention(truncate, ctx.spec.ppl_stride, len(chosen), need),
        "stride": None if truncate else ctx.spec.ppl_stride, "units": len(chosen), "docs": len(chosen),
        "doc_ids": [ids[i] for i in chosen], "lengths": rows, "skipped": [], "long_docs": docs.manifest.summary(),
    }
    table = [[r[c] for c in outputs.BPB_BY_LENGTH_COLUMNS] for r in rows]
    units = [(f"len_{r.length}", d, ids[d], nats, nbytes) for r in results for d, nats, nbytes, _, _ in r.units]
    return EvalOutcome(metric, {ctx.out_dir / outputs.BPB_BY_LENGTH_CSV: (outputs.BPB_BY_LENGTH_COLUMNS, table)},
                       units)


def run_core(ctx: EvalContext) -> EvalOutcome:
    """DCLM CORE on the bundle (partial when task files are missing)."""
    from rlab.evals.core_bundle import load_bundle
    from rlab.evals.core_metric import evaluate_core
    from rlab.paths import BaseLayout

    bundle = load_bundle(ctx.spec.core_bundle or BaseLayout(ctx.base_dir).eval_bundle_dir)
    with ctx.autocast():
        res = evaluate_core(
            ctx.model, ctx.tokenizer, bundle, ctx.device,
            max_per_task=ctx.spec.max_per_task, max_seq_len=ctx.train_seq_len,
            batch_tokens=ctx.batch_tokens, fewshot_seed=ctx.spec.seed,
        )
    metric = res.metrics()
    examples = [
        (t.task.label, idx, int(ok)) for t in res.tasks for idx, ok in zip(t.source_indices, t.correct)
    ]
    per_task = [
        (t.task.label, t.task.task_type, t.accuracy, t.centered, t.task.baseline, t.n) for t in res.tasks
    ]
    tables = {
        ctx.out_dir / outputs.CORE_EXAMPLES_CSV: (outputs.CORE_EXAMPLES_COLUMNS, examples),
        ctx.core_csv: (outputs.CORE_TASK_COLUMNS, per_task),
    }
    log.info("%s CORE %.4f%s", ctx.name, metric["core"], " (partial)" if metric["partial"] else "")
    return EvalOutcome(metric, tables)


def run_passkey(ctx: EvalContext) -> EvalOutcome:
    """Passkey retrieval accuracy per (length, depth), one random key per trial (rlab.evals.passkey)."""
    from rlab.core.engine import Engine
    from rlab.evals.passkey import evaluate_passkey

    lengths = list(ctx.spec.passkey_lengths or eval_lengths(ctx))
    with ctx.autocast():
        res = evaluate_passkey(
            Engine(ctx.model, name=ctx.name), ctx.tokenizer, lengths, ctx.spec.passkey_depths,
            ctx.spec.passkey_trials, ctx.spec.seed, ctx.device, ctx.batch_tokens,
        )
    metric = res.metrics()
    cells = [[c[k] for k in outputs.PASSKEY_COLUMNS] for c in metric["cells"]]
    trials = [(r.length, r.depth, r.trial, r.key, int(r.correct)) for r in res.records]
    return EvalOutcome(metric, {
        ctx.out_dir / outputs.PASSKEY_CSV: (outputs.PASSKEY_COLUMNS, cells),
        ctx.out_dir / outputs.PASSKEY_TRIALS_CSV: (outputs.PASSKEY_TRIALS_COLUMNS, trials),
    })


def run_ruler(ctx: EvalContext) -> EvalOutcome:
    """RULER-style synthetic tasks (rlab.evals.ruler), haystack from the long-document set."""
    from rlab.core.engine import Engine
    from rlab.evals.ruler import evaluate_ruler

    docs = long_docs(ctx)
    lengths = list(ctx.spec.ruler_lengths or eval_lengths(ctx))
    with ctx.autocast():
        res = evaluate_ruler(
            Engine(ctx.model, name=ctx.name), ctx.tokenizer, docs.texts, ctx.spec.ruler_tasks, lengths,
            ctx.spec.ruler_trials, ctx.spec.seed, ctx.device, ctx.batch_tokens,
        )
    metric = res.metrics()
    metric["long_docs"] = docs.manifest.summary()
    rows = [[r[k] for k in outputs.RULER_COLUMNS] for r in metric["by_task"]]
    trials = [(r.task, r.length, r.trial, r.score) for r in res.records]
    return EvalOutcome(metric, {
        ctx.out_dir / outputs.RULER_CSV: (outputs.RULER_COLUMNS, rows),
        ctx.out_dir / outputs.RULER_TRIALS_CSV: (outputs.RULER_TRIALS_COLUMNS, trials),
    })


EVALS: dict[str, Callable[[EvalContext], EvalOutcome]] = {
    "bpb": run_bpb,
    "bpb_length": run_bpb_length,
    "core": run_core,
    "passkey": run_passkey,
    "ruler": run_ruler,
}


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
