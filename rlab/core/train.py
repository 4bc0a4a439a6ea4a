"""Continued pretraining (or from-scratch training) of one tag: the torchrun worker.

Reads one resolved `RunConfig` JSON (written by the orchestrator) and declares no flags of its own:

    python -m rlab.core.train results/exp/runs/d20-pi/run.json                       # one process
    torchrun --nproc_per_node=8 -m rlab.core.train results/exp/runs/d20-pi/run.json  # 8 GPUs (NCCL)
    torchrun --nproc_per_node=2 -m rlab.core.train run.json                          # 2 CPU procs (gloo)

What one run does:
1. joins the torchrun job (`rlab.core.distributed`), sets the allocator config before CUDA starts;
2. checks the batch arithmetic: total_batch_size = device_batch_size x seq_len x world_size x grad_accum;
3. builds the model: from scratch, from `init` (weights at a step, the variant's RoPE, the new
   sequence_len), or with `resume: true` from the newest complete checkpoint this run wrote;
4. trains with DDP gradient averaging, Muon + AdamW, warmup / constant / warmdown, grad-norm
   clipping and skipping of non-finite or exploding steps;
5. logs the global (all-reduced) loss and throughput every step to `metrics.jsonl`, the
   tracker and a progress bar, runs val BPB under no_grad and saves checkpoints on their cadences.

Resume restores model, optimizer, LR-schedule position, RNG and data position, so the steps that
follow match an uninterrupted run. The optimizer state is sharded across ranks (`train.shard_optimizer`)
and each rank writes its own optimizer file; the set loads at any world size, so a run saved with 2
processes resumes with 1 and the reverse.

This module is the entry point; the run itself is `rlab.core.trainer.Trainer`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlab.core.distributed import (
    configure_allocator,
    init_distributed,
    shutdown_distributed,
    verify_allocator,
)
from rlab.core.metrics import MetricsWriter
from rlab.core.trainer import Trainer
from rlab.spec.run import RunConfig, read_config
from rlab.worker import run_worker

logger = logging.getLogger("rlab.core.train")  # also when run as __main__

COLLECTIVE_TIMEOUT_FACTOR = 3
"""The process group's timeout, in units of train.stall_timeout_s."""


def train(cfg: RunConfig, *, on_model: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Run one training job (this process's share of it); returns {"step", "val_bpb", "skipped"}.

    `on_model(model)` is called once the model is built, before training (e.g. to attach hooks).
    """

    alloc_conf = configure_allocator()  # before anything initialises CUDA
    # a collective waits 3x the stall bound, so rlab's watchdog names the silent rank before a peer times out
    info = init_distributed(timeout_s=COLLECTIVE_TIMEOUT_FACTOR * cfg.train.stall_timeout_s)
    finished = False
    try:
        alloc = verify_allocator(alloc_conf)
        if info.device.type == "cuda":
            logger.info("allocator: %s", alloc)
        try:
            trainer = Trainer(cfg, info, on_model=on_model)
        except Exception as exc:  # recorded for the orchestrator's table, then re-raised
            if info.is_main:  # the orchestrator's live table reads this file: say why nothing follows
                writer = MetricsWriter(Path(cfg.run_dir) / "metrics.jsonl", append=True)
                writer.write(
                    {
                        "type": "failed",
                        "step": None,
                        "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    }
                )
                writer.close()
            raise
        result = trainer.run()
        finished = True
        return result
    finally:
        shutdown_distributed(synchronize=finished)


def _train(path: Path) -> None:

    train(read_config(path, RunConfig))


def main(argv: list[str]) -> int:
    """`python -m rlab.core.train RUN_JSON`: errors rendered by the shared worker entry point (rlab.worker)."""

    return run_worker(argv, "python -m rlab.core.train RUN_JSON", _train)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
