"""Where a training run starts: weights, optimizer state, data position and the counters it carries on.

Three ways in, decided by `resolve_start`:

* **resume** (`resume: true` and a checkpoint this run wrote): everything comes back from that
  checkpoint: weights, rlab's optimizer file, RNG, the loader state, `tokens_trained`, skipped
  steps and the LR policy the run began with, so the steps that follow match an uninterrupted run.
* **continue** (`init` = a checkpoint): the weights at that step; the optimizer state of that
  checkpoint when rlab wrote it, or rebuilt from nanochat's per-rank shards
  (`rlab.nanochat.optim_import`); the train data from `cfg.data_start` (the base's recorded loader
  position, the same for every variant). A continuation whose optimizer state cannot be restored
  starts a fresh one at `FRESH_LR_SCALE` of the peak LRs with at least `FRESH_MIN_WARMUP_FRAC` of
  its steps as warmup (a fresh Adam at full LR knocks a trained model back; measured in the log).
* **scratch**: freshly initialised weights, the data from its beginning.

Counters are cumulative and exact across resumes and world-size changes: each checkpoint stores
`tokens_trained` (tokens of the optimizer steps that were applied, the base's included),
`train_state.run_tokens` (tokens this run consumed, skipped steps included) and
`train_state.skipped_total`; a resume carries on from the stored numbers rather than recomputing
them from step counts.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from rlab.core.checkpoint_meta import (
    CheckpointMeta,
    DataStartRecord,
    LrPolicy,
    OptimizerImport,
    read_meta,
)
from rlab.core.gpt_config import GPTConfig
from rlab.errors import CheckpointError
from rlab.nanochat.loader_position import NanochatPosition, nanochat_world_size
from rlab.paths import BaseLayout, checkpoint_steps, meta_file, optim_ranks
from rlab.spec.rope import RopeSpec
from rlab.spec.run import CheckpointInit, Lineage, RunConfig, ScratchInit

if TYPE_CHECKING:
    from torch.optim import Optimizer

    from rlab.core.gpt import GPT
    from rlab.nanochat.loader_position import NanochatPosition
    from rlab.spec.train import TrainSpec

logger = logging.getLogger("rlab.core.train")

FRESH_LR_SCALE = 0.1
FRESH_MIN_WARMUP_FRAC = 0.1


@dataclass
class StartPoint:
    """Everything the loop needs to know about where it starts."""

    step: int  # global step of the weights we start from
    run_start_step: int  # global step at which this run (schedule position 0) began
    model_state: dict[str, Any] | None  # None: from-scratch init
    config: GPTConfig  # the model's shape at this run's sequence length
    rope: RopeSpec
    lineage: Lineage | None
    tokens_trained: int = 0  # tokens of applied steps behind the starting weights (the base's included)
    run_tokens: int = 0  # tokens this run had consumed before `step` (resume only)
    optim_files: list[dict[str, Any]] | None = (
        None  # rlab's own optimizer files (every rank's), in rank order
    )
    nanochat_optim: tuple[Path, int] | None = None  # (dir, step) whose per-rank shards to import
    optimizer_note: str = "fresh"
    optimizer_import: OptimizerImport | None = None
    lr_policy: LrPolicy | None = None  # a resumed run's recorded peak-LR scale and warmup
    fresh_continuation: bool = False  # weights from a checkpoint, optimizer state not (yet) restored
    loader_state: dict[str, Any] | None = None
    loader_after: NanochatPosition | None = None  # where nanochat's loader of the base stopped
    data_start: DataStartRecord = field(default_factory=lambda: DataStartRecord(source="beginning"))
    skipped_total: int = 0
    resumed_from: int | None = None
    protected_steps: set[int] = field(default_factory=set)


def run_key(cfg: RunConfig) -> str:
    """Identifies the checkpoints one run writes, so resume and keep-last never touch anyone else's."""
    init = cfg.init
    src = f"{init.tag}@{init.step}" if isinstance(init, CheckpointInit) else "scratch"
    return f"{cfg.experiment}/{cfg.tag}<-{src}"


def _resumable_step(cfg: RunConfig, ckpt_dir: Path) -> int | None:

    key = run_key(cfg)
    steps = checkpoint_steps(ckpt_dir)
    for step in reversed(steps):
        state = read_meta(ckpt_dir, step).train_state
        if state is not None and state.run_key == key:
            if step != steps[-1]:
                logger.warning(
                    "newest checkpoint %d of %s was not written by this run; resuming at %d",
                    steps[-1],
                    cfg.tag,
                    step,
                )
            return step
    return None


DataStart: TypeAlias = "tuple[dict[str, Any] | None, NanochatPosition | None, DataStartRecord]"
"""`resolve_data_start`'s (rlab loader state, nanochat position, meta record)."""


def resolve_data_start(cfg: RunConfig, layout: BaseLayout, init_dir: Path) -> DataStart:
    """(rlab loader state, nanochat position, meta record) of where this run's train data starts."""

    ds = cfg.data_start
    if ds is None:
        return None, None, DataStartRecord(source="beginning")
    record = ds.model_dump(mode="json") | {"describe": ds.describe()}
    if ds.source == "rlab":
        return ds.loader_state, None, DataStartRecord.model_validate(record)
    base_dir = layout.checkpoint_dir(ds.tag)
    meta: CheckpointMeta | None
    try:
        meta = read_meta(base_dir, ds.step)
    except CheckpointError:  # the base went away; a clone of it carries the same files
        base_dir = init_dir
        meta = read_meta(init_dir, ds.step) if meta_file(init_dir, ds.step).exists() else None
    world, how = nanochat_world_size(base_dir, ds.step, meta)
    after = NanochatPosition(int(ds.pq_idx or 0), int(ds.rg_idx or 0), world, int(ds.epoch or 1))
    record.update(
        world_size=world,
        world_size_from=how,
        approximate=(
            "nanochat's own resume rule: starts at the next whole round of row groups, so the unread rest of the "
            "round the base was in is skipped"
            + ("" if world else "; world size unknown, rest of the shard skipped")
        ),
    )
    logger.info(
        "train data starts %s: %s (world size %s from %s); approximate like nanochat's resume",
        ds.describe(),
        after.describe(),
        world,
        how,
    )
    if after.epoch > 1:
        logger.info("the base had already passed over all train data %d time(s)", after.epoch - 1)
    return None, after, DataStartRecord.model_validate(record)


def resolve_start(cfg: RunConfig, layout: BaseLayout, vocab_size: int) -> StartPoint:
    """Decide the starting weights, RoPE, optimizer source and data position: a resume of this run's own
    checkpoint when there is one, else a continuation of `cfg.init`'s checkpoint, else from scratch."""
    target_dir = layout.checkpoint_dir(cfg.tag)
    init_dir = layout.checkpoint_dir(cfg.init.tag) if isinstance(cfg.init, CheckpointInit) else target_dir
    data = resolve_data_start(cfg, layout, init_dir)
    protected: set[int] = set()
    if isinstance(cfg.init, CheckpointInit) and cfg.init.tag == cfg.tag:
        protected.add(cfg.init.step)  # the cloned source step is never pruned
    if cfg.resume:
        step = _resumable_step(cfg, target_dir)
        if step is not None:
            return _resume(cfg, target_dir, step, data, protected)
        logger.info("resume: no checkpoint of this run in %s yet; starting from init", target_dir)
    if isinstance(cfg.init, CheckpointInit):
        return _continue(cfg, cfg.init, init_dir, data, protected)
    return _scratch(cfg, cfg.init, vocab_size, data)


def _resume(cfg: RunConfig, ckpt_dir: Path, step: int, data: DataStart, protected: set[int]) -> StartPoint:
    """Everything back from this run's own checkpoint at `step`."""
    from rlab.core.checkpoint import load_checkpoint_state, load_optim_set  # noqa: PLC0415 - defers numpy, torch

    _, after, data_record = data
    model_state, meta, info = load_checkpoint_state(ckpt_dir, step)
    state = meta.train_state
    if state is None or state.run_start_step is None:
        raise CheckpointError(
            f"{meta_file(ckpt_dir, step)}: meta has no train_state.run_start_step to resume from.",
            "Resume with the rlab that wrote it, or start over with --force.",
        )
    files = load_optim_set(ckpt_dir, step)
    own = files is not None
    logger.info("resuming %s at step %d (optimizer state: %s)", cfg.tag, step, "restored" if own else "fresh")
    return StartPoint(
        step=step,
        run_start_step=state.run_start_step,
        model_state=model_state,
        config=info.config,
        rope=meta.rope_spec(),
        lineage=meta.lineage,
        tokens_trained=meta.tokens_behind(),
        run_tokens=state.run_tokens or 0,
        optim_files=files,
        optimizer_note="restored" if own else "fresh (saved optimizer state missing or foreign)",
        optimizer_import=meta.optimizer.imported if meta.optimizer is not None else None,
        lr_policy=state.lr_policy,
        loader_state=meta.loader_state.model_dump() if meta.loader_state is not None else None,
        loader_after=after,
        data_start=meta.data_start or data_record,
        skipped_total=state.skipped_total or 0,
        resumed_from=step,
        protected_steps=protected,
    )


def _continue(
    cfg: RunConfig, init: CheckpointInit, src_dir: Path, data: DataStart, protected: set[int]
) -> StartPoint:
    """The weights of `init`'s checkpoint at this run's length; its optimizer state restored, imported or fresh."""
    from rlab.core.checkpoint import load_checkpoint_state, load_optim_set  # noqa: PLC0415 - defers numpy, torch

    loader_state, after, data_record = data
    seq_len = cfg.train.seq_len
    model_state, meta, info = load_checkpoint_state(src_dir, init.step)
    src_len = info.sequence_len
    # L0 left null means "the checkpoint's": the clone of this tag (made by `rlab continue`) already
    # recorded it in its meta; otherwise it is the source's training length.
    cloned_len = meta.rope.original_len if meta.rope is not None and init.tag == cfg.tag else None
    rope = cfg.rope.with_original_len(int(cloned_len or src_len))
    files = load_optim_set(src_dir, init.step)
    own = files is not None
    shards = bool(optim_ranks(src_dir, init.step))
    nanochat = None if own or not shards else (src_dir, init.step)
    note = (
        "restored from the source checkpoint"
        if own
        else "fresh: the source has no optimizer state"
        if not shards
        else "pending nanochat import"
    )
    logger.info(
        "starting %s from %s step %d: seq_len %d -> %d, %s; optimizer %s",
        cfg.tag,
        init.tag,
        init.step,
        src_len,
        seq_len,
        rope.describe(),
        "from nanochat's per-rank shards" if nanochat else note,
    )
    return StartPoint(
        step=init.step,
        run_start_step=init.step,
        model_state=model_state,
        config=replace(info.config, sequence_len=seq_len),
        rope=rope,
        lineage=cfg.lineage or Lineage(parent_tag=init.tag, parent_step=init.step),
        tokens_trained=meta.tokens_behind(),
        optim_files=files,
        nanochat_optim=nanochat,
        optimizer_note=note,
        fresh_continuation=not own,
        loader_state=loader_state,
        loader_after=after,
        data_start=data_record,
        protected_steps=protected,
    )


def _scratch(cfg: RunConfig, init: ScratchInit, vocab_size: int, data: DataStart) -> StartPoint:
    """Freshly initialised weights of the spec's model shape."""
    loader_state, after, data_record = data
    seq_len = cfg.train.seq_len
    m = init.model
    config = GPTConfig(
        sequence_len=seq_len,
        vocab_size=vocab_size,
        n_layer=m.n_layer,
        n_head=m.n_head,
        n_kv_head=m.n_kv_head or m.n_head,
        n_embd=m.n_embd,
        window_pattern=m.window_pattern,
        architecture=m.architecture,
        rotary_base=m.rotary_base,
    )
    logger.info("training %s from scratch: %s", cfg.tag, config.to_dict())
    return StartPoint(
        step=0,
        run_start_step=0,
        model_state=None,
        config=config,
        rope=cfg.rope.with_original_len(seq_len),
        lineage=cfg.lineage,
        loader_state=loader_state,
        loader_after=after,
        data_start=data_record,
    )


def fresh_lr_policy(steps: int, warmup_steps: int) -> LrPolicy:
    """The LR policy of a continuation that could not restore its optimizer state."""
    warmup = max(warmup_steps, math.ceil(FRESH_MIN_WARMUP_FRAC * steps), 1)
    return LrPolicy(peak_lr_scale=FRESH_LR_SCALE, warmup_steps=warmup)


def start_optimizers(
    start: StartPoint,
    model: GPT,
    spec: TrainSpec,
    n_embd: int,
    restore_rng: Callable[[Any], None],
    *,
    rank: int = 0,
    world_size: int = 1,
    compile_ns: bool = False,
) -> tuple[list[Optimizer], LrPolicy]:
    """Build the optimizers (state sharded over `world_size` ranks) and load the state `start` names;
    returns (optimizers, lr_policy).

    Updates `start.optimizer_note` / `start.optimizer_import` with what happened.
    """
    from rlab.core.optim import build_optimizers  # noqa: PLC0415 - defers torch
    from rlab.core.optim_shards import load_optimizer_state  # noqa: PLC0415 - defers torch
    from rlab.nanochat.optim_import import import_nanochat_optimizer  # noqa: PLC0415 - defers torch

    def build() -> list[Optimizer]:
        return build_optimizers(
            model, spec.lr, n_embd, rank=rank, world_size=world_size, compile_ns=compile_ns
        )

    optimizers = build()
    if start.optim_files is not None:
        try:
            load_optimizer_state(optimizers, start.optim_files)
            restore_rng(start.optim_files[0].get("rng"))
            start.fresh_continuation = False
        except (ValueError, KeyError) as exc:  # e.g. a model whose parameter groups changed shape
            optimizers = build()
            start.optimizer_note = f"fresh (saved optimizer state does not fit: {exc})"
            logger.warning("optimizer state not loaded (%s); starting a fresh optimizer", exc)
        start.optim_files = None
    elif start.nanochat_optim is not None:
        report = import_nanochat_optimizer(*start.nanochat_optim, model, optimizers)
        start.optimizer_import = report.to_meta()
        if report.restored:
            start.optimizer_note = report.describe()
            start.fresh_continuation = False
        else:
            start.optimizer_note = (
                f"fresh: the source's optimizer files are foreign and were not imported ({report.reason})"
            )
    policy = start.lr_policy or LrPolicy(peak_lr_scale=1.0, warmup_steps=spec.lr.warmup_steps)
    if start.resumed_from is None and start.fresh_continuation:
        policy = fresh_lr_policy(spec.steps, spec.lr.warmup_steps)
        start.optimizer_note += (
            f"; peak LRs x{policy.peak_lr_scale:g} with {policy.warmup_steps} warmup step(s)"
        )
        logger.warning(
            "continuing %s with a fresh optimizer: %s", "from a trained checkpoint", start.optimizer_note
        )
    scale = policy.peak_lr_scale
    if scale != 1.0:
        for opt in optimizers:
            for g in opt.param_groups:
                g["initial_lr"] = g["initial_lr"] * scale
    return optimizers, policy
