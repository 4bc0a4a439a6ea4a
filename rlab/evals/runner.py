"""The eval worker: load one tag, run the requested evals, merge them into its eval.json.

    python -m rlab.evals results/<exp>/evals/<tag>/eval_run.json                 # one process
    torchrun --nproc_per_node=8 -m rlab.evals results/<exp>/evals/<tag>/eval_run.json
    torchrun --nproc_per_node=2 -m rlab.evals eval_run.json                       # CPU, gloo

It reads an `EvalRunConfig` (no flags of its own), loads the checkpoint, runs each eval of `eval.evals`
in turn (releasing memory after each), and on rank 0 writes the outputs atomically, eval.json last.

Never lose a fuller eval: eval.json holds one section per eval, each with how it was measured
(`rlab.records.provenance.SectionRun`). A run replaces the sections it ran and keeps the others when they describe
the same checkpoint (same step and meta file). When they describe another checkpoint the run refuses,
unless it re-runs all of them or `force` is set (then they are dropped, with their files). A section
whose headline number could not be computed (NaN, e.g. from a broken checkpoint) fails the run: nothing
is written and the worker exits non-zero.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.core.checkpoint import find_last_step, load_model
from rlab.core.checkpoint_meta import CheckpointMeta, meta_sha256, read_meta
from rlab.core.distributed import configure_allocator, init_distributed, verify_allocator
from rlab.core.precision import stream_dtype
from rlab.core.tokenizer import Tokenizer, load_token_bytes
from rlab.errors import CheckpointError, EvalError
from rlab.evals import catalog, outputs
from rlab.evals.context import EvalContext, EvalOutcome
from rlab.evals.definition import EvalDefinition, resolve
from rlab.evals.progress import ProgressDisplay
from rlab.evals.rope_eval import apply_eval_rope
from rlab.evals.windows import apply_eval_windows, lengths_in_use, window_setting
from rlab.paths import BaseLayout
from rlab.provenance import code_version, current_platform
from rlab.records.base import ContractError, Record, short_hash
from rlab.records.eval_doc import AttentionRecord, EvalDoc, EvalMetrics, read_eval_doc, write_eval_doc
from rlab.records.provenance import CheckpointFacts, SectionRun
from rlab.records.rows import read_rows, write_rows
from rlab.records.units import BpbUnit
from rlab.spec.run import EvalRunConfig

if TYPE_CHECKING:
    from rlab.core.distributed import DistInfo

log = logging.getLogger(__name__)

HEADLINE_FIELDS = ("bpb", "core", "overall")
"""Numbers that must be finite in every section that has them (else the metric could not be computed)."""


def checkpoint_facts(ckpt_dir: Path, step: int, meta: CheckpointMeta) -> CheckpointFacts:
    """What the checkpoint's meta says about its training (nanochat metas leave most of it null)."""
    state = meta.train_state
    return CheckpointFacts(
        step=step,
        meta_sha256=meta_sha256(ckpt_dir, step),
        tokens_trained=meta.tokens_trained,
        skipped_steps=state.skipped_total if state is not None else None,
        data_start=meta.data_start_label,
        seed=meta.train_seed,
        train_code_version=meta.code_version.label if meta.code_version is not None else None,
        train_world_size=meta.world_size,
        train_dtype=state.dtype if state is not None else None,
        train_platform=state.platform if state is not None else None,
    )


def kept_sections(out_dir: Path, facts: CheckpointFacts, requested: list[str], force: bool) -> EvalDoc | None:
    """The previous eval.json when its sections not re-run may be kept; None when it is to be replaced.

    Raises EvalError when keeping them is impossible (another checkpoint) and dropping them was not asked.
    """
    path = out_dir / outputs.EVAL_JSON
    if not path.is_file():
        return None
    try:
        previous = read_eval_doc(path)
    except ContractError as exc:
        sections, why = _raw_sections(path), f"it is not readable by this rlab ({exc.message})"
    else:
        sections = previous.metrics.present()
        why = f"it describes step {previous.step}" + (
            " (another checkpoint written at this step)" if previous.step == facts.step else ""
        )
        if previous.checkpoint.step == facts.step and previous.checkpoint.meta_sha256 == facts.meta_sha256:
            return previous
    others = [s for s in sections if s not in requested]
    if not others:
        return None
    if force:
        log.warning("dropping %s from %s: %s (--force)", ", ".join(others), path, why)
        return None
    raise EvalError(
        f"{path} holds {', '.join(others)}, which this run does not re-run, and {why}: step {facts.step} now.",
        "Re-run those evals too, or pass --force to drop them.",
    )


def _raw_sections(path: Path) -> list[str]:

    try:
        metrics = json.loads(path.read_text(encoding="utf-8")).get("metrics") or {}
        return sorted(metrics) if isinstance(metrics, dict) else []
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return []


def nonfinite_headlines(name: str, section: Record) -> list[str]:
    """`section.field` paths of headline numbers that are missing or not finite."""
    bad: list[str] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k in HEADLINE_FIELDS and (v is None or (isinstance(v, float) and not math.isfinite(v))):
                    bad.append(f"{where}.{k}")
                else:
                    walk(v, f"{where}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")

    walk(section.model_dump(), name)
    return bad


def run_evals(cfg: EvalRunConfig) -> EvalDoc:
    """Run the configured evals for one tag; returns the eval.json document (on every rank)."""
    import torch

    evals = {name: catalog.get(name) for name in cfg.eval.evals}  # unknown names fail before loading anything
    fns = {name: run_function(d) for name, d in evals.items()}
    layout = BaseLayout(Path(cfg.base_dir))
    ckpt_dir = layout.checkpoint_dir(cfg.tag)
    step = cfg.step if cfg.step is not None else find_last_step(ckpt_dir)
    if step is None:
        raise CheckpointError(f"No complete checkpoint in {ckpt_dir}.", hint="Check the base dir and --tag.")
    facts = checkpoint_facts(ckpt_dir, step, read_meta(ckpt_dir, step))
    out_dir = Path(cfg.out_dir)
    previous = kept_sections(out_dir, facts, list(fns), cfg.force)

    alloc_conf = configure_allocator()  # no-op when the worker entry set it; before CUDA initialises
    info = init_distributed()
    alloc = verify_allocator(alloc_conf)
    if info.device_type == "cuda":
        log.info("allocator: %s", alloc)
    model, meta = load_model(ckpt_dir, step, info.device)
    cuda = info.device_type == "cuda"
    model.set_stream_dtype(stream_dtype(info.device, torch.bfloat16 if cuda else None))  # as in training
    model.eval()
    rope = model.rope.model_dump(mode="json")  # the tag's own config, before any eval-time switch
    rope_eval = apply_eval_rope(model, cfg.eval, int(cfg.eval.target_len or meta.sequence_len))
    name = f"{cfg.tag} step {step}"
    tokenizer = Tokenizer.from_directory(layout.tokenizer_dir)
    autocast = partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16) if cuda else nullcontext
    ctx = EvalContext(
        model=model,
        tokenizer=tokenizer,
        meta=meta,
        spec=cfg.eval,
        device=info.device,
        base_dir=Path(cfg.base_dir),
        out_dir=out_dir,
        variant_csv=Path(cfg.core_csv),
        token_bytes=load_token_bytes(layout.tokenizer_dir, info.device),
        name=name,
        rank=info.rank,
        world_size=info.world_size,
        autocast=autocast,
    )
    attention = apply_eval_windows(model, cfg.eval, lengths_in_use(cfg.eval, ctx.eval_lengths()))
    log.info(
        "evaluating %s (%s) on %d rank(s): %s", name, model.rope.describe(), info.world_size, ", ".join(fns)
    )
    capped = [f"{w.length} (sees {w.capped_at})" for w in attention.lengths if w.capped_at is not None]
    if capped:
        log.warning("%s: context capped by its attention windows at length(s) %s", name, ", ".join(capped))
    settings = cfg.eval.model_dump(mode="json")
    outcomes: dict[str, EvalOutcome] = {}
    runs: dict[str, SectionRun] = {}
    with ProgressDisplay(info.rank) as display:
        for eval_name, fn in fns.items():
            t0 = time.perf_counter()
            ctx.progress = display.for_eval(eval_name)
            outcome = fn(ctx)
            ctx.progress = None
            outcomes[eval_name] = outcome
            if evals[eval_name].windowed:
                outcome.settings_extra.update(window_setting(model))
            runs[eval_name] = _section_run(
                evals[eval_name], settings, outcome, round(time.perf_counter() - t0, 3), info, cuda
            )
            release_memory()
            log.info("%s: %s done in %.1fs", name, eval_name, runs[eval_name].seconds)
    bad = [p for n, o in outcomes.items() for p in nonfinite_headlines(n, o.metric)]
    if bad:
        raise EvalError(
            f"{name}: could not compute {', '.join(bad[:6])}{' ...' if len(bad) > 6 else ''} "
            "(not finite); nothing was written.",
            "Check the checkpoint (a non-finite weight gives NaN everywhere).",
        )
    doc = merge_doc(previous, cfg, facts, rope, ctx.train_seq_len, outcomes, runs, rope_eval, attention)
    if info.is_main:
        write_outputs(out_dir, Path(cfg.core_csv), doc, outcomes)
    del model, ctx
    release_memory()
    return doc


def _section_run(
    definition: EvalDefinition,
    settings: dict,
    outcome: EvalOutcome,
    seconds: float,
    info: DistInfo,
    cuda: bool,
) -> SectionRun:
    """How one section was measured: the settings it depends on (and their hash), its data, code, machine and time."""

    picked = definition.settings_of(settings, outcome.settings_extra)
    return SectionRun(
        code_version=code_version(),
        world_size=info.world_size,
        dtype="bfloat16" if cuda else "float32",
        platform=current_platform(info.device),
        settings=picked,
        settings_hash=short_hash(picked),
        data_hash=outcome.data_hash,
        seconds=seconds,
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def merge_doc(
    previous: EvalDoc | None,
    cfg: EvalRunConfig,
    facts: CheckpointFacts,
    rope: dict,
    train_seq_len: int,
    outcomes: dict[str, EvalOutcome],
    runs: dict[str, SectionRun],
    rope_eval: dict | None = None,
    attention: AttentionRecord | None = None,
) -> EvalDoc:
    """The new eval.json: the previous one's sections not re-run (when kept), plus this run's."""
    sections = previous.metrics.model_dump(exclude_none=True) if previous is not None else {}
    measured = dict(previous.measured) if previous is not None else {}
    for eval_name, outcome in outcomes.items():
        sections[eval_name] = outcome.metric.model_dump()
        measured[eval_name] = runs[eval_name]
    return EvalDoc(
        experiment=cfg.experiment,
        tag=cfg.tag,
        variant=cfg.variant,
        rope=rope,
        rope_eval=rope_eval,
        attention=attention,
        train_seq_len=train_seq_len,
        checkpoint=facts,
        metrics=EvalMetrics.model_validate(sections),
        measured=measured,
    )


def write_outputs(out_dir: Path, variant_csv: Path, doc: EvalDoc, outcomes: dict[str, EvalOutcome]) -> None:
    """Tables of the sections run, bpb_units.csv merged by section, stale files removed, eval.json last."""
    present = set(doc.metrics.present())
    for outcome in outcomes.values():
        for path, (model, rows) in outcome.tables.items():
            write_rows(path, rows, model.columns)
    units_path = out_dir / outputs.BPB_UNITS_CSV
    try:
        old_units = read_rows(units_path, BpbUnit) if units_path.is_file() else []
    except ContractError as exc:
        log.warning("replacing %s: %s", units_path, exc.message)
        old_units = []
    units = [u for u in old_units if u.section in present and u.section not in outcomes]
    units += [u for o in outcomes.values() for u in o.units]
    if units:
        write_rows(units_path, units, BpbUnit.columns)
    else:
        units_path.unlink(missing_ok=True)
    for definition in catalog.definitions():
        if definition.name not in present:
            for file in definition.files:
                if (out_dir / file.name).exists():
                    log.info(
                        "removing %s: its eval (%s) is no longer in eval.json", file.name, definition.name
                    )
                    (out_dir / file.name).unlink()
            if definition.variant_csv is not None:
                variant_csv.unlink(missing_ok=True)
    write_eval_doc(out_dir / outputs.EVAL_JSON, doc)
    log.info("wrote %s", out_dir / outputs.EVAL_JSON)


def run_function(definition: EvalDefinition) -> Callable[[EvalContext], EvalOutcome]:
    """The function that runs `definition`'s eval (`EvalDefinition.run`)."""
    fn = resolve(definition.run)
    if not callable(fn):
        raise TypeError(f"eval {definition.name}: {definition.run} is not a function")
    return fn


def release_memory() -> None:
    """Drop what an eval left behind so memory does not grow eval after eval."""
    gc.collect()
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
