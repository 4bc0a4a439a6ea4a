"""Memory per rank of rlab's GPT next to nanochat d314e96's own GPT at the same shape, counted the same way.

    NANOCHAT_DIR=/tmp/nanochat-d314e96 python -m bench memory     # d20, 8 x 8192 tokens per rank, 8 ranks
    python -m bench.memory_bench --size tiny                       # the bench-smoke size
    git -C <nanochat clone> archive d314e96 | tar -x -C /tmp/nanochat-d314e96   # a d314e96 tree (never committed)

Both models go through the same counters (`rlab.memory`), under fake tensors on the CPU (no memory is
allocated; no GPU needed):

* saved KiB per token per layer, and for the loss head per token: what one forward saves for the
  backward, as the slope between one and two rows per rank (so fixed costs such as the lm_head's
  gradient are not spread over the tokens). Eager: autograd's saved-tensor hooks under bf16 autocast.
  Compiled: what torch.compile's partitioner keeps (both trainers compile the model on CUDA); its
  "head" column is everything outside the blocks (embedding and loss head).
* peak GiB per rank: one traced training step at the full shape (model, optimizer state as each
  optimizer keeps it per rank, gradients, DDP buckets for rlab, whose trainer wraps DDP; nanochat's
  d314e96 optimizers reduce gradients themselves): eager, and with the saved activations replaced by the
  compiled count. rlab's compiled figure is `rlab memory`'s; nanochat's is the same arithmetic on its step.
  The working memory at the peak is the eager ops' in both: for nanochat, whose eager loss head holds
  several fp32 (tokens x vocab) tensors, that overstates the compiled run (its d20 speedrun trains 32 x 2048,
  the same tokens per rank, on 80 GB GPUs).

nanochat as it runs on CUDA: `wte` in bf16 (its `init_weights` casts it there), bf16 autocast, and under
torchrun its DistAdamW (ZeRO-2 state slices) and DistMuon (momentum on the owning rank); here those run on
a fake process group of the same world size, as rank 0, with their own `@torch.compile` switched off.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rlab.core.gpt_config import GPTConfig
from rlab.memory.compiled import compiled_saved
from rlab.memory.fake_world import fake_world
from rlab.memory.plan import plan_training
from rlab.memory.shape import TrainShape
from rlab.memory.trace import build_training, on_cpu, rlab_model, saved_by_region, trace_step

SIZES = {
    "d20": dict(n_layer=20, n_embd=1280, n_head=10, vocab_size=65536, seq_len=8192, batch=8, nproc=8),
    "tiny": dict(n_layer=2, n_embd=128, n_head=2, vocab_size=512, seq_len=256, batch=2, nproc=2),
}
KIB, GIB = 2**10, 2**30
HEAD_TARGET_KIB = 8.0  # issue 27: the loss head keeps at most 8 KiB per token
PEAK_TARGET_GIB = 72.0  # issue 27: d20 at 8 x 8192 per rank on 8 ranks within 90% of 80 GiB


def nanochat_2025(n_layer: int, n_embd: int, n_head: int, vocab_size: int, seq_len: int) -> GPTConfig:
    """A nanochat-2025 model of these sizes, with as many kv heads as query heads (the benches' models)."""
    return GPTConfig(
        sequence_len=seq_len,
        vocab_size=vocab_size,
        n_layer=n_layer,
        n_head=n_head,
        n_kv_head=n_head,
        n_embd=n_embd,
        architecture="nanochat-2025",
    )


def _shape(size: dict[str, Any], batch: int | None = None):

    config = nanochat_2025(
        size["n_layer"], size["n_embd"], size["n_head"], size["vocab_size"], size["seq_len"]
    )
    return TrainShape(
        config=config, seq_len=size["seq_len"], device_batch_size=batch or size["batch"], nproc=size["nproc"]
    )


# ----- nanochat d314e96's GPT, built as its base_train builds it on CUDA -----------------------------


def _nanochat_modules(nanochat_dir: Path):
    if str(nanochat_dir) not in sys.path:
        sys.path.insert(0, str(nanochat_dir))
    import nanochat.gpt as gpt  # noqa: PLC0415 - optional dependency (nanochat)

    return gpt


def nanochat_model(nanochat_dir: Path) -> Callable[[GPTConfig], Any]:
    gpt = _nanochat_modules(nanochat_dir)

    def make(config: GPTConfig, shape=None):

        def build():
            model = gpt.GPT(gpt.GPTConfig(**config.nanochat_dict()))
            model.transformer.wte.to(dtype=torch.bfloat16)  # what its init_weights does on CUDA
            return model

        return on_cpu(build)

    return make


def nanochat_build(nanochat_dir: Path):
    make = nanochat_model(nanochat_dir)

    def build(shape):
        model = make(shape.config)
        with contextlib.redirect_stdout(None):  # its optimizers print their parameter groups
            optimizers = model.setup_optimizers()
        return model, optimizers, list(model.transformer.h)

    return build


# ----- the counts ------------------------------------------------------------------------------------


def eager_per_token(size: dict[str, Any], build) -> dict[str, float]:
    """KiB per token saved by eager autograd: per layer, and by the loss head."""

    one, two = (saved_by_region(_shape(size, b), build) for b in (1, 2))
    tokens = size["seq_len"]
    return {
        "eager_layer": (two["layers"] - one["layers"]) / tokens / size["n_layer"] / KIB,
        "eager_head": (two["head"] - one["head"]) / tokens / KIB,
    }


def compiled_per_token(size: dict[str, Any], make_model) -> dict[str, float]:
    """KiB per token kept by torch.compile's partitioner: per layer, and outside the blocks."""

    one, two = (compiled_saved(_shape(size, b), make_model) for b in (1, 2))
    tokens = size["seq_len"]
    return {
        "compiled_layer": (two.per_layer - one.per_layer) / tokens / KIB,
        "compiled_outside": (two.outside_blocks - one.outside_blocks) / tokens / KIB,
    }


def rlab_row(size: dict[str, Any], compiled: bool = True) -> dict[str, Any]:

    plan = plan_training(_shape(size).model_copy(update={"compile": compiled}), suggest=False)
    return {
        **eager_per_token(size, build_training),
        **(compiled_per_token(size, rlab_model) if compiled else {}),
        "peak": plan.peak_gib,
        "eager_peak": sum(plan.peak_parts_gib.values()) + plan.ddp_buckets_gib,
        "transient": plan.peak_parts_gib.get("transient", 0.0),
        "phase": plan.peak_phase,
    }


def nanochat_row(size: dict[str, Any], nanochat_dir: Path, compiled: bool = True) -> dict[str, Any]:
    """nanochat's counts; its peak: its traced step at the full shape, the saved activations replaced by
    the compiled count (no DDP)."""

    shape, make = _shape(size), nanochat_model(nanochat_dir)
    with fake_world(size["nproc"], environ=True, compile_off=True):  # nanochat compiles its optimizer steps
        eager = eager_per_token(size, nanochat_build(nanochat_dir))
        trace = trace_step(shape, build=nanochat_build(nanochat_dir))
    kept = trace.peak_parts.get("activations", 0) + trace.peak_parts.get("weight_copies", 0)
    peak = (trace.peak - kept + compiled_saved(shape, make).total) / GIB if compiled else trace.peak / GIB
    return {
        **eager,
        **(compiled_per_token(size, make) if compiled else {}),
        "peak": peak,
        "eager_peak": trace.peak / GIB,
        "transient": trace.peak_parts.get("transient", 0) / GIB,
        "phase": trace.peak_phase,
    }


def main(argv: list[str]) -> None:

    parser = argparse.ArgumentParser(prog="python -m bench.memory_bench")
    parser.add_argument("--size", choices=sorted(SIZES), default="d20")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--eager-only", action="store_true", help="skip torch.compile's counts (each compile takes seconds)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    size = SIZES[args.size]
    nanochat = os.environ.get("NANOCHAT_DIR")
    t0 = time.perf_counter()
    print(
        f"{args.size}: n_layer {size['n_layer']}, n_embd {size['n_embd']}, vocab {size['vocab_size']:,}; "
        f"{size['batch']} x {size['seq_len']} tokens per rank, {size['nproc']} ranks; bf16; "
        "counted under fake tensors on the CPU (no GPU)",
        flush=True,
    )
    compiled = not args.eager_only
    rows = {"rlab": rlab_row(size, compiled)}
    if nanochat:
        rows["nanochat d314e96"] = nanochat_row(size, Path(nanochat), compiled)
    _print(rows)
    if nanochat:
        r, n = rows["rlab"], rows["nanochat d314e96"]
        ratio = f"{r['compiled_layer'] / n['compiled_layer']:.2f}x compiled, " if compiled else ""
        print(
            f"\nrlab / nanochat: saved per token per layer {ratio}{r['eager_layer'] / n['eager_layer']:.2f}x "
            f"eager (goal <= 1); peak {r['peak'] / n['peak']:.2f}x"
        )
    else:
        print("\n(no nanochat column: set NANOCHAT_DIR to a nanochat d314e96 tree)")
    r = rows["rlab"]
    if args.size == "d20":
        print(
            f"goals: head <= {HEAD_TARGET_KIB:g} KiB/token: eager {r['eager_head']:.1f} "
            f"({'met' if r['eager_head'] <= HEAD_TARGET_KIB else 'not met'}); `rlab memory` peak <= "
            f"{PEAK_TARGET_GIB:g} GiB: {r['peak']:.1f} ({'met' if r['peak'] <= PEAK_TARGET_GIB else 'not met'})"
        )
    print(f"({time.perf_counter() - t0:.0f} s)")


def _print(rows: dict[str, dict[str, Any]]) -> None:
    print(
        f"{'':<18}{'saved KiB/token/layer':>22}{'head KiB/token':>15}{'outside blocks':>15}"
        f"{'peak GiB per rank':>22}"
    )
    print(f"{'':<18}{'eager':>11}{'compiled':>11}{'eager':>15}{'compiled':>15}{'eager':>11}{'compiled':>11}")
    for name, r in rows.items():
        cl, co = (f"{r[k]:.2f}" if k in r else "-" for k in ("compiled_layer", "compiled_outside"))
        peak = f"{r['peak']:.2f}" if "compiled_layer" in r else "-"
        print(
            f"{name:<18}{r['eager_layer']:>11.2f}{cl:>11}{r['eager_head']:>15.2f}"
            f"{co:>15}{r['eager_peak']:>11.2f}{peak:>11}"
        )
    for name, r in rows.items():
        print(
            f"  {name}: the eager peak falls in {r['phase']}, {r['transient']:.2f} GiB of it working memory"
        )
    print(
        "  (compiled peak = the eager peak with the saved tensors replaced by torch.compile's; the working\n"
        "  memory at the peak stays the eager ops', which overstates a loss head that inductor fuses)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
