"""Sliding-window layers on CUDA: FlexAttention block masks against the dense-mask reference.

    python -m bench.window_bench                           # a nanochat-2026 shape at 8192 tokens (CUDA)
    python -m bench.window_bench --depth 12 --seq-len 16384 --batch 2
    python -m bench.window_bench --cpu                     # the same flow, tiny and uncompiled (smoke)

A nanochat-2026 model (window pattern SSSL: three quarter-length windows, then full context) with random
weights is trained for a few steps under bf16 autocast and torch.compile (`dynamic=False`, as the trainer
compiles it), once with its windowed layers through FlexAttention and once through SDPA with a dense boolean
mask, from the same weights and batch (on the CPU, forwards only: FlexAttention has no CPU backward). Printed per kernel: tokens/s of forward + backward (median past
warm-up), peak `torch.cuda.max_memory_allocated`, and the first step's loss (the two must agree within bf16).
The loss is the model's own (`GPT.forward` with targets); the optimizer is left out: it costs both the same.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from rlab.core.gpt import GPT, GPTConfig

GIB = 2**30


def _model(args: argparse.Namespace, device: str, kernel: str):  # -> GPT

    config = GPTConfig(
        sequence_len=args.seq_len,
        vocab_size=args.vocab,
        n_layer=args.depth,
        n_head=args.n_embd // 128 if device == "cuda" else 2,
        n_kv_head=args.n_embd // 128 if device == "cuda" else 2,
        n_embd=args.n_embd,
        window_pattern="SSSL",
        architecture="nanochat-2026",
    )
    torch.manual_seed(0)
    with torch.device("meta"):
        model = GPT(config)
    model.to_empty(device=device)
    model.init_weights()
    model.window_kernel = kernel  # type: ignore[assignment]
    if device == "cuda":
        model.set_stream_dtype(torch.bfloat16)
    return model


def run_kernel(args: argparse.Namespace, device: str, kernel: str) -> dict:
    """Forward + backward steps of one kernel; tokens/s, peak memory and the first loss."""

    model = _model(args, device, kernel)
    step = torch.compile(model, dynamic=False) if device == "cuda" else model
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randint(0, args.vocab, (args.batch, args.seq_len), generator=gen).to(device)
    y = torch.roll(x, -1, dims=1)
    amp = (
        torch.autocast(device, dtype=torch.bfloat16)
        if device == "cuda"
        else torch.autocast("cpu", enabled=False)
    )
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, first = [], None
    backward = device == "cuda"  # FlexAttention has no CPU backward: the smoke flow times forwards
    for i in range(args.steps):
        t0 = time.perf_counter()
        with amp, torch.set_grad_enabled(backward):
            loss = step(x, y)
        if backward:
            loss.backward()
            model.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if i == 0:
            first = float(loss.detach())
    settled = times[args.warmup :] or times[-1:]
    peak = torch.cuda.max_memory_allocated() / GIB if device == "cuda" else None
    del model, step
    if device == "cuda":
        torch.cuda.empty_cache()
    return {
        "tokens_per_s": args.batch * args.seq_len / statistics.median(settled),
        "peak_gib": peak,
        "first_loss": first,
        "compile_s": times[0],
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.window_bench")
    for name, default in dict(
        depth=12, n_embd=768, vocab=32768, seq_len=8192, batch=4, steps=12, warmup=3
    ).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    parser.add_argument("--cpu", action="store_true", help="tiny and uncompiled on the CPU (a smoke test)")
    args = parser.parse_args(argv)

    cuda = torch.cuda.is_available() and not args.cpu
    if not cuda and not args.cpu:
        print("no CUDA device: the window benchmark did not run (`--cpu` runs its smoke flow)")
        return
    device = "cuda" if cuda else "cpu"
    if not cuda:
        vars(args).update(depth=4, n_embd=64, vocab=512, seq_len=256, batch=2, steps=3, warmup=1)
    where = torch.cuda.get_device_name(0) if cuda else "CPU (smoke: figures mean nothing)"
    print(
        f"windows (nanochat-2026, SSSL): {where}, torch {torch.__version__}; n_layer {args.depth}, n_embd "
        f"{args.n_embd}, vocab {args.vocab:,}, {args.batch} x {args.seq_len} tokens, {args.steps} steps",
        flush=True,
    )
    results = {}
    for kernel in ("flex", "dense"):
        print(f"  {kernel}: compiling and running ...", flush=True)
        try:
            results[kernel] = run_kernel(args, device, kernel)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports what failed and goes on
            results[kernel] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        r = results[kernel]
        if "error" in r:
            print(f"  {kernel:<6} failed: {r['error']}", flush=True)
        else:
            peak = f"{r['peak_gib']:.2f} GiB" if r["peak_gib"] is not None else "-"
            print(
                f"  {kernel:<6} {r['tokens_per_s']:>12,.0f} tokens/s  peak {peak}  first loss "
                f"{r['first_loss']:.4f}  first step (compile) {r['compile_s']:.1f} s",
                flush=True,
            )
    if all("error" not in r for r in results.values()):
        flex, dense = results["flex"], results["dense"]
        print(
            f"flex / dense: tokens/s {flex['tokens_per_s'] / dense['tokens_per_s']:.2f}x; first losses differ by "
            f"{abs(flex['first_loss'] - dense['first_loss']):.2e}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
