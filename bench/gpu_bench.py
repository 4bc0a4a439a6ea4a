"""GPU figures for the user's run: the d20 shape at 8192 tokens on every GPU here, next to nanochat's own trainer.

    make gpu-check                                          # CUDA venv, the gpu tests, then this
    NANOCHAT_DIR=/tmp/nanochat-d314e96 python -m bench gpu  # with nanochat d314e96's base_train as the anchor
    python -m bench.gpu_bench --steps 40 --device-batch-size 4
    python -m bench.gpu_bench --cpu --steps 4               # the same flow on the CPU at a tiny shape (smoke)
    python -m bench.gpu_bench --work-dir /tmp/gb            # keep the runs; a base prepared there is reused
    python -m bench gpu --seq-len 32768 --device-batch-size 1 --activation-checkpointing all --no-evals
    python -m bench gpu --seq-len 131072 --device-batch-size 1 --activation-checkpointing all --no-evals

What runs, in one call:
1. a base dir with a synthetic corpus (random words: no network) and a 65,536-token tokenizer, so the
   model is exactly d20 (n_layer 20, n_embd 1280, 10 heads of 128, vocab 65,536);
2. the memory plan of that shape (`rlab memory`, counted on the CPU) for the ranks found here;
3. rlab's real trainer under torchrun on all visible GPUs (DDP over NCCL, bf16 + torch.compile), at
   seq 8192 and the shipped spec's device batch (experiments/rope_scaling_d20.yaml), one micro-batch per
   rank, with in-training evals and samples (whose peak memory must stay flat);
4. nanochat d314e96's `scripts.base_train` at the same depth, length, batch and data (`NANOCHAT_DIR`;
   it needs psutil, which `make gpu-check` installs).

Printed: tokens/s and MFU of both, rlab's as a ratio of nanochat's; the plan's predicted peak next to the
measured `torch.cuda.max_memory_allocated` of rank 0 (both trainers' own figures); the eval-interval peaks.
On a machine without CUDA it says so and returns (the CPU benchmarks are `python -m bench`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from bench.memory_bench import nanochat_2025
from rlab.data.prepare import PrepareOptions, prepare_data
from rlab.evals import catalog
from rlab.evals.runner import run_evals
from rlab.memory.plan import plan_training
from rlab.memory.shape import TrainShape
from rlab.spec.run import EvalRunConfig, RunConfig

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "experiments" / "rope_scaling_d20.yaml"
D20 = {"depth": 20, "n_embd": 1280, "n_head": 10, "vocab": 65536, "seq_len": 8192}
CPU_SMOKE = {"depth": 2, "n_embd": 128, "n_head": 2, "vocab": 1024, "seq_len": 256}
GIB, MIB = 2**30, 2**20


def _synthetic_base(root: Path, vocab: int) -> Path:
    """A base dir whose corpus is random words (enough distinct ones for `vocab` BPE tokens), prepared by
    rlab's own pipeline in nanochat's layout (shards, tokenizer.pkl, token_bytes.pt)."""

    rng = random.Random(0)
    words = [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10))) for _ in range(120_000)
    ]
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    docs, length = (1200, 2000) if vocab > 8192 else (40, 600)  # 65,536 BPE tokens need many distinct words
    long_docs = 24 if vocab > 8192 else 0  # ~20k tokens each: the evals at 2x the training length need them
    for i in range(docs + long_docs):
        words_in = length if i < docs else 8000
        text = " ".join(rng.choice(words) + ("." if rng.random() < 0.07 else "") for _ in range(words_in))
        (corpus / f"{i:05d}.txt").write_text(text)
    base = root / "base"
    prepare_data(base, [corpus], vocab_size=vocab, options=PrepareOptions(shard_chars=4_000_000))
    return base


def shipped_device_batch() -> int:
    """The d20 spec's train.device_batch_size (what the user's run uses per rank)."""

    return int(yaml.safe_load(SPEC.read_text())["train"]["device_batch_size"])


def _plan(shape: dict[str, int], batch: int, nproc: int, device: str, checkpointing: str = "off") -> Any:

    config = nanochat_2025(shape["depth"], shape["n_embd"], shape["n_head"], shape["vocab"], shape["seq_len"])
    ts = TrainShape(
        config=config,
        seq_len=shape["seq_len"],
        device_batch_size=batch,
        nproc=nproc,
        device=device,
        activation_checkpointing=checkpointing,
    )
    return plan_training(ts, suggest=False)


def _failure(proc: subprocess.CompletedProcess) -> str:
    """The line that says why a child failed: the last exception line of its output (torchrun's own
    summary follows it), else its last line."""
    lines = (proc.stdout + proc.stderr).strip().splitlines() or ["(no output)"]
    errors = [
        ln
        for ln in lines
        if re.match(r"^[\w.]*(Error|Exception)\b.*:", ln.strip()) and "ChildFailedError" not in ln
    ]
    return (errors or lines)[-1].strip()[:500]


TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--standalone")
"""torchrun on this node, from this interpreter (`rlab continue` builds its own: `orchestrate.launch.torchrun_argv`)."""


def _torchrun(nproc: int, module: list[str], **kwargs) -> subprocess.CompletedProcess:
    argv = [*TORCHRUN, f"--nproc-per-node={nproc}", *module]
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


def _prepared_base(root: Path, vocab: int) -> Path:
    """`root/base` when an earlier run prepared it (its corpus manifest is there), else a new one."""
    base = root / "base"
    if (base / "rlab_corpus.json").is_file() and (base / "tokenizer" / "tokenizer.pkl").is_file():
        return base
    return _synthetic_base(root, vocab)


def run_rlab(
    base: Path,
    root: Path,
    shape: dict[str, int],
    batch: int,
    nproc: int,
    steps: int,
    cuda: bool,
    checkpointing: str = "off",
) -> dict:
    """rlab's trainer under torchrun; its metrics.jsonl summarised (past compilation and warm-up)."""

    run_dir = root / "runs" / "bench"
    cfg = RunConfig.model_validate(
        {
            "experiment": "gpu-bench",
            "tag": "bench",
            "variant": "rope",
            "base_dir": str(base),
            "run_dir": str(run_dir),
            "init": {
                "kind": "scratch",
                "model": {"n_layer": shape["depth"], "n_embd": shape["n_embd"], "n_head": shape["n_head"]},
            },
            "rope": {},
            "tracking": {"wandb": "disabled"},
            "train": {
                "seq_len": shape["seq_len"],
                "steps": steps,
                "device_batch_size": batch,
                "dtype": "bfloat16" if cuda else "float32",
                "compile": cuda,
                "activation_checkpointing": checkpointing,
                "eval_every": max(1, steps // 4),
                "sample_every": max(1, steps // 4),
                "eval_tokens": batch * shape["seq_len"] * nproc,
                "save_every": None,
                "lr": {"warmup_steps": 2},
            },
        }
    )
    run_json = root / "bench.json"
    run_json.write_text(cfg.model_dump_json())
    proc = _torchrun(nproc, ["-m", "rlab.core.train", str(run_json)])
    (root / "rlab_train.log").write_text(proc.stdout + proc.stderr)  # the kernel line, compile, warnings
    if proc.returncode != 0:
        return {"error": _failure(proc)}
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["type"] == "train"]
    settled = train[3:] or train[-1:]  # past compilation and warm-up
    return {
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in settled),
        "mfu": statistics.median(r["mfu"] for r in settled) if settled[0].get("mfu") is not None else None,
        "peak_gib": max(r["peak_mem_mb"] for r in train) * MIB / GIB,
        "eval_peaks_mb": [round(r["peak_mem_mb"]) for r in records if r["type"] == "eval"],
        "alloc_verified": "'verified': True" in proc.stderr,
    }


def run_nanochat(
    nanochat_dir: Path, base: Path, shape: dict[str, int], batch: int, nproc: int, steps: int
) -> dict:
    """nanochat's base_train at the same depth, length, batch and data: its tok/sec and mfu lines (median past
    warm-up) and its "Peak memory usage" line."""
    module = [
        "-m",
        "scripts.base_train",
        f"--depth={shape['depth']}",
        f"--max_seq_len={shape['seq_len']}",
        f"--device_batch_size={batch}",
        f"--total_batch_size={batch * shape['seq_len'] * nproc}",
        f"--num_iterations={steps}",
        "--eval_every=100000",
        f"--eval_tokens={batch * shape['seq_len'] * nproc}",
        "--core_metric_every=-1",
        "--sample_every=100000",
        "--model_tag=nanochat-bench",  # beside rlab's tag "bench", not over it
    ]
    # nanochat's tree first on the path, the caller's PYTHONPATH (carried packages, say) kept after it
    path = os.pathsep.join(p for p in (str(nanochat_dir), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, NANOCHAT_BASE_DIR=str(base), PYTHONPATH=path)
    proc = _torchrun(nproc, module, cwd=nanochat_dir, env=env)
    (base.parent / "nanochat_train.log").write_text(proc.stdout + proc.stderr)
    rates = [float(m.replace(",", "")) for m in re.findall(r"tok/sec: ([\d,]+)", proc.stdout)][3:]
    mfus = [float(m) for m in re.findall(r"mfu: ([\d.]+)", proc.stdout)][3:]
    peak = re.findall(r"Peak memory usage: ([\d.]+)MiB", proc.stdout)
    if not rates:  # its figures stand even when something after training failed (its report, say)
        return {"error": _failure(proc)}
    return {
        "exit_code": proc.returncode,
        "tokens_per_s": statistics.median(rates),
        "mfu_percent": statistics.median(mfus) if mfus else None,
        "peak_gib": float(peak[-1]) * MIB / GIB if peak else None,
    }


EVAL_SIZES = {
    "bpb_tokens": 65536,
    "length_tokens": 32768,
    "passkey_depths": (0.5,),
    "passkey_trials": 4,
    "ruler_trials": 2,
    "copy_trials": 4,
    "max_per_task": 16,
}
"""Small counts: the figures are time and memory per eval at long lengths, not the evals' verdicts."""


def run_evals_timed(base: Path, root: Path, lengths: tuple[int, ...], cuda: bool) -> list[dict]:
    """Every eval of the catalog on rlab's bench checkpoint at `lengths`, one at a time in this process
    (`rlab.evals.runner.run_evals`, the worker's own function): seconds and peak memory of each."""

    out = []
    for name in catalog.names():
        cfg = EvalRunConfig.model_validate(
            {
                "experiment": "gpu-bench",
                "tag": "bench",
                "variant": "rope",
                "base_dir": str(base),
                "out_dir": str(root / "evals" / name),
                "core_csv": str(root / "evals" / name / "core.csv"),
                "eval": {
                    "evals": [name],
                    "lengths": list(lengths),
                    "core_bundle": str(REPO / "tests" / "fixtures" / "eval_bundle"),
                    **EVAL_SIZES,
                },
            }
        )
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        try:
            run_evals(cfg)
            record: dict = {"eval": name, "seconds": round(time.perf_counter() - start, 1)}
            if cuda:
                record["peak_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 2)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports what failed and goes on
            record = {"eval": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        print(f"eval: {json.dumps(record)}", flush=True)
        out.append(record)
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_bench")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--device-batch-size", type=int, default=None, help="default: the shipped d20 spec's")
    parser.add_argument(
        "--cpu", action="store_true", help="the same flow on the CPU at a tiny shape (a smoke test)"
    )
    parser.add_argument("--seq-lens", default=None, help=argparse.SUPPRESS)  # the old flag, ignored
    parser.add_argument(
        "--seq-len", type=int, default=None, help="tokens per row (default: 8192; CPU smoke 256)"
    )
    parser.add_argument(
        "--activation-checkpointing",
        default="off",
        help="off, all or every-k: e.g. --seq-len 131072 --device-batch-size 1 --activation-checkpointing all",
    )
    parser.add_argument(
        "--work-dir", type=Path, default=None, help="keep the base and the runs here (default: a temp dir)"
    )
    parser.add_argument("--no-eval-bench", action="store_true", help="skip the CORE/BPB throughput part")
    parser.add_argument("--no-evals", action="store_true", help="skip each eval at long lengths")
    args = parser.parse_args(argv)

    cuda = torch.cuda.is_available()
    if not cuda and not args.cpu:
        print("no CUDA device: the GPU benchmark did not run (see `make gpu-check` on a GPU machine)")
        return
    shape = {**(D20 if cuda else CPU_SMOKE), **({"seq_len": args.seq_len} if args.seq_len else {})}
    ckpt = args.activation_checkpointing
    nproc = torch.cuda.device_count() if cuda else 1
    batch = args.device_batch_size or (shipped_device_batch() if cuda else 2)
    where = f"{nproc} x {torch.cuda.get_device_name(0)}" if cuda else "CPU (smoke: figures mean nothing)"
    print(f"device: {where}, torch {torch.__version__}", flush=True)
    print(
        f"shape: n_layer {shape['depth']}, n_embd {shape['n_embd']}, {shape['n_head']} heads, vocab "
        f"{shape['vocab']:,}, {batch} x {shape['seq_len']} tokens per rank, {nproc} rank(s), {args.steps} steps, "
        f"activation checkpointing {ckpt}",
        flush=True,
    )
    nanochat = os.environ.get("NANOCHAT_DIR") if cuda and ckpt == "off" else None  # it has no checkpointing
    with contextlib.ExitStack() as stack:
        if args.work_dir is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rlab-gpu-bench-")))
        else:
            root = args.work_dir.resolve()
            root.mkdir(parents=True, exist_ok=True)
        base = _prepared_base(root, shape["vocab"])
        try:
            plan = _plan(shape, batch, nproc, "cuda" if cuda else "cpu", ckpt)
            print(
                f"memory plan (rlab memory): peak {plan.peak_gib:.2f} GiB per rank (at {plan.peak_phase})",
                flush=True,
            )
        except Exception as exc:  # noqa: BLE001 - the trainers still run; the plan's failure is reported
            plan = None
            print(f"memory plan failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}", flush=True)
        ours = run_rlab(base, root, shape, batch, nproc, args.steps, cuda, ckpt)
        print(f"rlab: {json.dumps(ours)}", flush=True)  # each result as soon as it is in (a cut run keeps it)
        anchor = run_nanochat(Path(nanochat), base, shape, batch, nproc, args.steps) if nanochat else None
        if anchor is not None:
            print(f"nanochat: {json.dumps(anchor)}", flush=True)
        if not args.no_evals and "error" not in ours:
            lengths = (shape["seq_len"], 2 * shape["seq_len"])
            print(f"\n--- each eval on rlab's checkpoint at {lengths} tokens ---", flush=True)
            run_evals_timed(base, root, lengths, cuda)
    _report(plan, ours, anchor, cuda, eval_bench=not args.no_eval_bench)


def _report(plan: Any, ours: dict, anchor: dict | None, cuda: bool, eval_bench: bool = True) -> None:
    print(f"\n{'trainer':<10}{'tokens/s':>12}{'MFU':>8}{'peak GiB':>10}{'planned':>9}")
    planned = f"{plan.peak_gib:.2f}" if plan is not None else "-"
    if "error" in ours:
        print(f"{'rlab':<10}  failed: {ours['error']}")
    else:
        mfu = f"{100 * ours['mfu']:.1f}%" if ours["mfu"] is not None else "-"
        print(f"{'rlab':<10}{ours['tokens_per_s']:>12,.0f}{mfu:>8}{ours['peak_gib']:>10.2f}{planned:>9}")
    if anchor is not None:
        if "error" in anchor:
            print(f"{'nanochat':<10}  failed: {anchor['error']}")
        else:
            amfu = f"{anchor['mfu_percent']:.1f}%" if anchor["mfu_percent"] is not None else "-"
            apeak = f"{anchor['peak_gib']:.2f}" if anchor["peak_gib"] is not None else "-"
            print(f"{'nanochat':<10}{anchor['tokens_per_s']:>12,.0f}{amfu:>8}{apeak:>10}{'':>9}")
    elif cuda:
        print("(no anchor: set NANOCHAT_DIR to a nanochat d314e96 tree to time its base_train alongside)")
    if "error" in ours:
        return
    if cuda and plan is not None:
        print(
            f"plan vs measured peak: {plan.peak_gib:.2f} vs {ours['peak_gib']:.2f} GiB "
            f"({plan.peak_gib / ours['peak_gib'] - 1:+.1%})"
        )
    if anchor is not None and "error" not in anchor:
        line = f"rlab / nanochat: tokens/s {ours['tokens_per_s'] / anchor['tokens_per_s']:.2f}x (goal >= 1)"
        if anchor["peak_gib"]:
            line += f", peak memory {ours['peak_gib'] / anchor['peak_gib']:.2f}x (goal <= 1)"
        print(line)
    peaks = ours["eval_peaks_mb"]
    flat = f" (max/min past the first: {max(peaks[1:]) / min(peaks[1:]):.3f})" if len(peaks) > 2 else ""
    print(f"eval-interval peaks (MB): {peaks}{flat}; allocator verified: {ours['alloc_verified']}")
    if cuda and eval_bench:
        from bench import eval_bench  # noqa: PLC0415 - `eval_bench` is also a local name

        print("\n--- CORE batched vs one-at-a-time and BPB tokens/s on CUDA ---", flush=True)
        eval_bench.main(["--device", "cuda", "--configs", "realistic,realistic-2048"])


if __name__ == "__main__":
    main(sys.argv[1:])
