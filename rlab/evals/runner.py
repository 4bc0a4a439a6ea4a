"""The eval worker: load one tag, run the requested evals, write its outputs.

    python -m rlab.evals results/<exp>/evals/<tag>/eval_run.json                 # one process
    torchrun --nproc_per_node=8 -m rlab.evals results/<exp>/evals/<tag>/eval_run.json
    torchrun --nproc_per_node=2 -m rlab.evals eval_run.json                       # CPU, gloo

It reads an `EvalRunConfig` (no flags of its own), loads the checkpoint with
`rlab.core.checkpoint.load_model`, runs each eval of `eval.evals` in turn (releasing memory
after each), and on rank 0 writes eval.json, the CSVs and `core_csv` atomically. Every rank
computes; rank 0 alone writes.
"""

from __future__ import annotations

import logging
import subprocess
import time
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from rlab import __version__
from rlab.evals import outputs
from rlab.evals.registry import EvalContext, get_eval, release_memory
from rlab.evals.rope_eval import apply_eval_rope
from rlab.spec.run import EvalRunConfig

log = logging.getLogger(__name__)


def code_version() -> str:
    """rlab's version plus the git commit of its checkout when there is one (`0.1.0+g1a2b3c4`)."""
    repo = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{sha}" if sha else __version__


def run_evals(cfg: EvalRunConfig) -> dict[str, Any]:
    """Run the configured evals for one tag; returns the eval.json document (on every rank)."""
    import torch

    from rlab.core.checkpoint import load_model
    from rlab.core.distributed import init_distributed
    from rlab.core.tokenizer import Tokenizer, load_token_bytes
    from rlab.paths import BaseLayout

    fns = {name: get_eval(name) for name in cfg.eval.evals}  # unknown names fail before loading anything
    info = init_distributed()
    layout = BaseLayout(Path(cfg.base_dir))
    model, meta = load_model(layout.checkpoint_dir(cfg.tag), cfg.step, info.device)
    model.eval()
    rope = model.rope.model_dump(mode="json")  # the tag's own config, before any eval-time switch
    rope_eval = apply_eval_rope(model, cfg.eval, int(cfg.eval.target_len or meta["model_config"]["sequence_len"]))
    step = int(meta["step"])
    name = f"{cfg.tag} step {step}"
    tokenizer = Tokenizer.from_directory(layout.tokenizer_dir)
    autocast = (
        partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16) if info.device_type == "cuda" else nullcontext
    )
    ctx = EvalContext(
        model=model, tokenizer=tokenizer, meta=meta, spec=cfg.eval, device=info.device,
        base_dir=Path(cfg.base_dir), out_dir=Path(cfg.out_dir), core_csv=Path(cfg.core_csv),
        token_bytes=load_token_bytes(layout.tokenizer_dir, info.device), name=name,
        rank=info.rank, world_size=info.world_size, autocast=autocast,
    )
    log.info("evaluating %s (%s) on %d rank(s): %s", name, model.rope.describe(), info.world_size, ", ".join(fns))
    metrics: dict[str, Any] = {}
    tables: dict[Path, tuple] = {}
    units: list[tuple[str, int, str, float, float]] = []
    timings: dict[str, float] = {}
    for eval_name, fn in fns.items():
        t0 = time.perf_counter()
        outcome = fn(ctx)
        timings[eval_name] = round(time.perf_counter() - t0, 3)
        metrics[eval_name] = outcome.metric
        tables.update(outcome.tables)
        units += outcome.units
        del outcome
        release_memory()
        log.info("%s: %s done in %.1fs", name, eval_name, timings[eval_name])
    doc = {
        "schema": outputs.EVAL_SCHEMA,
        "experiment": cfg.experiment,
        "tag": cfg.tag,
        "variant": cfg.variant,
        "step": step,
        "rope": rope,
        "rope_eval": rope_eval,
        "train_seq_len": ctx.train_seq_len,
        "tokens_trained": meta.get("tokens_trained"),
        "code_version": code_version(),
        "settings": cfg.eval.model_dump(mode="json"),
        "world_size": info.world_size,
        "seconds": timings,
        "metrics": metrics,
    }
    if info.is_main:
        write_outputs(Path(cfg.out_dir), doc, tables, units)
    del model, ctx
    release_memory()
    return doc




def write_outputs(out_dir: Path, doc: dict, tables: dict[Path, tuple], units: list) -> None:
    """CSV tables first, eval.json last (its presence means the tag's outputs are complete)."""
    for path, (columns, rows) in tables.items():
        outputs.write_csv_atomic(path, columns, rows)
    if units:
        outputs.write_csv_atomic(out_dir / outputs.BPB_UNITS_CSV, outputs.BPB_UNITS_COLUMNS, units)
    outputs.write_json_atomic(out_dir / outputs.EVAL_JSON, doc)
    log.info("wrote %s", out_dir / outputs.EVAL_JSON)
