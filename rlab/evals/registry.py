"""The evals `rlab eval` can run, by name: each adapts one pure eval function to an `EvalContext`.

    EVALS = {"bpb": ..., "bpb_length": ..., "core": ..., "passkey": ...}

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

    @property
    def train_seq_len(self) -> int:
        return int(self.meta["model_config"]["sequence_len"])

    @property
    def batch_tokens(self) -> int:
        """Tokens per forward pass: device_batch_size sequences of the training length."""
        return self.spec.device_batch_size * self.train_seq_len


@dataclass
class EvalOutcome:
    metric: dict
    tables: dict[Path, Table] = field(default_factory=dict)
    units: list[tuple[str, int, float, float]] = field(default_factory=list)
    """(metric, unit, nats, bytes) rows for bpb_units.csv."""


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
        units += [(split, i, n, b) for i, (n, b) in enumerate(res.units)]
        log.info("%s BPB %s: %.4f over %d tokens", ctx.name, split, res.bpb, res.tokens)
    return EvalOutcome(metric, units=units)


def bpb_lengths(ctx: EvalContext) -> list[int]:
    from rlab.evals.bpb import resolve_lengths

    return resolve_lengths(ctx.train_seq_len, ctx.spec.length_multipliers, ctx.spec.lengths)


def run_bpb_length(ctx: EvalContext) -> EvalOutcome:
    """BPB vs context length on the long-document set (sliding window, see rlab.evals.bpb)."""
    from rlab.core.data import load_long_docs
    from rlab.evals.bpb import evaluate_bpb_by_length

    docs = ctx.tokenizer.encode(load_long_docs(ctx.base_dir), prepend=ctx.tokenizer.bos_token_id)
    with ctx.autocast():
        metric, raw = evaluate_bpb_by_length(
            ctx.model, docs, bpb_lengths(ctx), ctx.spec.length_tokens, ctx.token_bytes,
            ctx.tokenizer.bos_token_id, ctx.batch_tokens, block=ctx.spec.length_block,
        )
    rows = [[r[c] for c in outputs.BPB_BY_LENGTH_COLUMNS] for r in metric["lengths"]]
    units = [(f"len_{L}", i, n, b) for L, res in raw.items() for i, (n, b) in enumerate(res.units)]
    return EvalOutcome(metric, {ctx.out_dir / outputs.BPB_BY_LENGTH_CSV: (outputs.BPB_BY_LENGTH_COLUMNS, rows)}, units)


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
    """Passkey retrieval accuracy per (length, depth), greedy decoding through the engine."""
    from rlab.core.engine import Engine
    from rlab.evals.passkey import evaluate_passkey

    lengths = list(ctx.spec.passkey_lengths or bpb_lengths(ctx))
    with ctx.autocast():
        res = evaluate_passkey(
            Engine(ctx.model, name=ctx.name), ctx.tokenizer, lengths, ctx.spec.passkey_depths,
            ctx.spec.passkey_trials, ctx.spec.seed, ctx.device,
        )
    metric = res.metrics()
    rows = [[c[k] for k in outputs.PASSKEY_COLUMNS] for c in metric["cells"]]
    return EvalOutcome(metric, {ctx.out_dir / outputs.PASSKEY_CSV: (outputs.PASSKEY_COLUMNS, rows)})


def run_copy_distance(ctx: EvalContext) -> EvalOutcome:
    """Loss on a passage repeated at a known distance vs its first occurrence, by window (rlab.evals.copy_distance)."""
    from rlab.core.data import load_long_docs
    from rlab.evals import copy_distance as cd

    docs = ctx.tokenizer.encode(load_long_docs(ctx.base_dir))
    windows = list(ctx.spec.copy_lengths or bpb_lengths(ctx))
    with ctx.autocast():
        rows = cd.evaluate_copy_distance(ctx.model, docs, ctx.tokenizer.bos_token_id, windows, ctx.spec.copy_trials,
                                         ctx.spec.seed, ctx.batch_tokens, ctx.device)
    metric = {"passage": cd.PASSAGE, "prefix": cd.PREFIX, "windows": cd.summarize(rows, seed=ctx.spec.seed)}
    table = [[r[c] for c in cd.COLUMNS] for r in rows]
    return EvalOutcome(metric, {ctx.out_dir / outputs.COPY_DISTANCE_CSV: (cd.COLUMNS, table)})


EVALS: dict[str, Callable[[EvalContext], EvalOutcome]] = {
    "bpb": run_bpb,
    "bpb_length": run_bpb_length,
    "core": run_core,
    "passkey": run_passkey,
    "copy_distance": run_copy_distance,
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
