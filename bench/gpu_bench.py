"""GPU figures (issue 17): the real trainer on CUDA, bf16 + torch.compile under torchrun (NCCL), a
d12-sized model at seq 2048 and 8192, with tokens/s and MFU against the GPU's bf16 peak; peak memory
per in-training eval interval (evals + samples every few steps, which must stay flat); and, as an
anchor in the same call, nanochat's own `base_train` on the same shape and data when `NANOCHAT_DIR`
points at a nanochat tree (d314e96: `git archive d314e96` of its public repository, carried as files).
CORE examples/s batched vs one-at-a-time and BPB tokens/s on the GPU come from `bench.eval_bench`.

    python -m bench gpu                              # or: make gpu-check
    NANOCHAT_DIR=/path/to/nanochat-d314e96 python -m bench gpu
    python -m bench.gpu_bench --steps 40 --seq-lens 2048,8192

On a machine without CUDA it says so and returns (the CPU benchmarks are `python -m bench train eval`).
Both trainers read the same prepared base dir (rlab's embedded corpus, nanochat's layout), so the
anchor's tokens/s are on the same model shape, batch and data.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DEPTH = 12  # nanochat's d12: width 64 * depth = 768, heads of 128
BATCH_FOR_SEQ = {2048: 16, 8192: 4}  # 32k tokens per step at either length


def _prepare_base(root: Path) -> Path:
    from rlab.data.prepare import prepare_data

    base = root / "base"
    prepare_data(base, vocab_size=8192)
    return base


def _run_rlab(base: Path, root: Path, seq_len: int, steps: int) -> dict:
    """The real trainer under torchrun on one GPU; its metrics.jsonl summarised."""
    from rlab.spec.run import RunConfig

    tag = f"bench-{seq_len}"
    run_dir = root / "runs" / tag
    batch = BATCH_FOR_SEQ.get(seq_len, max(1, 32768 // seq_len))
    cfg = RunConfig.model_validate(
        {
            "experiment": "gpu-bench",
            "tag": tag,
            "variant": "rope",
            "base_dir": str(base),
            "run_dir": str(run_dir),
            "init": {
                "kind": "scratch",
                "model": {"n_layer": DEPTH, "n_embd": 64 * DEPTH, "n_head": DEPTH * 64 // 128},
            },
            "rope": {},
            "tracking": {"wandb": "disabled"},
            "train": {
                "seq_len": seq_len,
                "steps": steps,
                "device_batch_size": batch,
                "dtype": "bfloat16",
                "compile": True,
                "eval_every": max(1, steps // 4),
                "sample_every": max(1, steps // 4),
                "eval_tokens": 4 * batch * seq_len,
                "save_every": None,
                "lr": {"warmup_steps": 2},
            },
        }
    )
    run_json = root / f"{tag}.json"
    run_json.write_text(cfg.model_dump_json())
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=1",
        "-m",
        "rlab.core.train",
        str(run_json),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["type"] == "train"][3:]  # past compilation and warm-up
    evals = [r for r in records if r["type"] == "eval"]
    return {
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in train),
        "mfu": statistics.median(r["mfu"] for r in train) if train[0].get("mfu") is not None else None,
        "eval_peaks_mb": [round(r["peak_mem_mb"]) for r in evals],
        "alloc_verified": "'verified': True" in proc.stderr,
    }


def _run_nanochat(nanochat_dir: Path, base: Path, seq_len: int, steps: int) -> dict:
    """nanochat's own base_train on the same shape, batch and data (its tok/sec lines, median past warm-up)."""
    batch = BATCH_FOR_SEQ.get(seq_len, max(1, 32768 // seq_len))
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=1",
        "-m",
        "scripts.base_train",
        f"--depth={DEPTH}",
        f"--max_seq_len={seq_len}",
        f"--device_batch_size={batch}",
        f"--total_batch_size={batch * seq_len}",
        f"--num_iterations={steps}",
        "--eval_every=100000",
        f"--eval_tokens={batch * seq_len}",
        "--core_metric_every=-1",
        "--sample_every=100000",
        f"--model_tag=bench{seq_len}",
    ]
    env = dict(os.environ, NANOCHAT_BASE_DIR=str(base), PYTHONPATH=str(nanochat_dir))
    proc = subprocess.run(argv, cwd=nanochat_dir, env=env, capture_output=True, text=True)
    rates = [float(m.replace(",", "")) for m in re.findall(r"tok/sec: ([\d,]+)", proc.stdout)][3:]
    mfus = [float(m) for m in re.findall(r"mfu: ([\d.]+)", proc.stdout)][3:]
    if proc.returncode != 0 or not rates:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return {
        "tokens_per_s": statistics.median(rates),
        "mfu_percent": statistics.median(mfus) if mfus else None,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_bench")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seq-lens", default="2048,8192")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: the GPU benchmark did not run (see `make gpu-check` on a GPU machine)")
        return
    print(
        f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
        f"{torch.cuda.device_count()} GPU(s)",
        flush=True,
    )
    nanochat = os.environ.get("NANOCHAT_DIR")
    with tempfile.TemporaryDirectory(prefix="rlab-gpu-bench-") as tmp:
        root = Path(tmp)
        base = _prepare_base(root)
        print(
            f"\n{'seq':>6} {'trainer':>9} {'tokens/s':>10} {'MFU':>7} {'vs nanochat':>12}  eval-interval peaks (MB)"
        )
        for seq_len in (int(s) for s in args.seq_lens.split(",")):
            ours = _run_rlab(base, root, seq_len, args.steps)
            anchor = _run_nanochat(Path(nanochat), base, seq_len, args.steps) if nanochat else None
            if "error" in ours:
                print(f"{seq_len:>6} {'rlab':>9}  failed: {ours['error']}")
                continue
            ratio = (
                f"{ours['tokens_per_s'] / anchor['tokens_per_s']:.2f}x"
                if anchor and "error" not in anchor
                else "-"
            )
            mfu = f"{100 * ours['mfu']:.1f}%" if ours["mfu"] is not None else "-"
            peaks = ours["eval_peaks_mb"]
            flat = (
                f" (max/min past the first {max(peaks[1:]) / min(peaks[1:]):.3f})" if len(peaks) > 2 else ""
            )
            print(
                f"{seq_len:>6} {'rlab':>9} {ours['tokens_per_s']:>10,.0f} {mfu:>7} {ratio:>12}  {peaks}{flat}; "
                f"allocator verified: {ours['alloc_verified']}"
            )
            if anchor is not None:
                if "error" in anchor:
                    print(f"{seq_len:>6} {'nanochat':>9}  failed: {anchor['error']}")
                else:
                    amfu = f"{anchor['mfu_percent']:.1f}%" if anchor["mfu_percent"] is not None else "-"
                    print(f"{seq_len:>6} {'nanochat':>9} {anchor['tokens_per_s']:>10,.0f} {amfu:>7}")
        if not nanochat:
            print("(no anchor: set NANOCHAT_DIR to a nanochat d314e96 tree to time its base_train alongside)")
    from bench import eval_bench

    print("\n--- CORE batched vs one-at-a-time and BPB tokens/s on CUDA ---", flush=True)
    eval_bench.main(["--device", "cuda", "--configs", "realistic,realistic-2048"])


if __name__ == "__main__":
    main(sys.argv[1:])
