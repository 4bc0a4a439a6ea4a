"""Eval throughput: CORE examples/s batched vs one example per forward (same tasks, same answers),
and BPB tokens/s, on a small random GPT with a BPE tokenizer trained on bundle text.

    python -m bench eval
    python -m bench.eval_bench --device cuda --layers 4 --width 256

The machine may be shared, so both CORE modes are timed in the same run, back to back, and the
speedup is their ratio. The batched and one-at-a-time verdicts are compared example by example.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

BUNDLE = Path(__file__).resolve().parents[1].parent / "shared" / "eval_bundle"
TASKS = ("copa", "winograd", "arc_easy", "bigbench_operators", "lambada_openai", "hellaswag")


def _texts(bundle: Path, per_file: int = 200) -> list[str]:
    out = []
    for p in sorted((bundle / "eval_data").rglob("*.jsonl")):
        with p.open() as f:
            for i, line in enumerate(f):
                if i >= per_file:
                    break
                out.extend(str(v) for v in json.loads(line).values())
    return out


def main(argv: list[str]) -> None:
    import torch

    from rlab.core.gpt import GPT, GPTConfig
    from rlab.core.tokenizer import Tokenizer
    from rlab.evals.bpb import evaluate_bpb
    from rlab.evals.core_bundle import load_bundle, load_task_data
    from rlab.evals.core_metric import evaluate_task, subsample

    ap = argparse.ArgumentParser(prog="bench.eval_bench")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--per-task", type=int, default=48)
    ap.add_argument("--batch-rows", type=int, default=8, help="rows of seq-len tokens per batched forward")
    ap.add_argument("--bundle", type=Path, default=BUNDLE)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    tok = Tokenizer.train(_texts(args.bundle), vocab_size=1024)
    torch.manual_seed(0)
    heads = max(1, args.width // 64) if args.width >= 128 else 2
    cfg = GPTConfig(sequence_len=args.seq_len, vocab_size=tok.vocab_size, n_layer=args.layers,
                    n_head=heads, n_kv_head=heads, n_embd=args.width)
    model = GPT(cfg)
    model.init_weights()
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 0.5)
        for b in model.transformer.h:
            b.attn.c_proj.weight.normal_(0, 0.3)
            b.mlp.c_proj.weight.normal_(0, 0.3)
    model = model.to(device).eval()
    print(f"model: {args.layers} layers, width {args.width}, seq {args.seq_len}, vocab {tok.vocab_size}, "
          f"device {device}, threads {args.threads}")

    bundle = load_bundle(args.bundle)
    data = {}
    for label in TASKS:
        task = bundle.task(label)
        data[label] = (task, *subsample(load_task_data(task), args.per_task))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def run(label: str, batched: bool):
        task, rows, order = data[label]
        t0 = time.perf_counter()
        verdicts = evaluate_task(model, tok, task, rows, device, source_indices=order, max_seq_len=args.seq_len,
                                 batch_tokens=args.batch_rows * args.seq_len, batched=batched)
        sync()
        return verdicts, time.perf_counter() - t0

    run(TASKS[0], True)  # warm-up (allocator, kernels)
    print(f"CORE, {args.per_task} examples per task (time includes rendering + tokenization):")
    print(f"  {'task':<22}{'shots':>6}{'one-at-a-time ex/s':>20}{'batched ex/s':>14}{'speedup':>9}  identical")
    total_single = total_batched = 0.0
    n_total, all_same = 0, True
    for label in TASKS:
        single, t_single = run(label, False)
        batched, t_batched = run(label, True)
        same = single == batched
        n = len(single)
        n_total, all_same = n_total + n, all_same and same
        total_single, total_batched = total_single + t_single, total_batched + t_batched
        print(f"  {label:<22}{data[label][0].num_fewshot:>6}{n / t_single:>20.1f}{n / t_batched:>14.1f}"
              f"{t_single / t_batched:>8.1f}x  {same}")
    print(f"  {'all':<22}{'':>6}{n_total / total_single:>20.1f}{n_total / total_batched:>14.1f}"
          f"{total_single / total_batched:>8.1f}x  {all_same}")

    B, T, steps = args.batch_rows, args.seq_len, 8
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, tok.vocab_size, (B, T), generator=g).to(device),
                torch.randint(0, tok.vocab_size, (B, T), generator=g).to(device)) for _ in range(steps)]
    token_bytes = tok.token_bytes().to(device=device, dtype=torch.long)
    evaluate_bpb(model, batches[:1], 1, token_bytes)
    sync()
    t0 = time.perf_counter()
    res = evaluate_bpb(model, batches, steps, token_bytes)
    sync()
    dt = time.perf_counter() - t0
    print(f"BPB: {res.tokens} tokens in {dt:.2f}s = {res.tokens / dt:,.0f} tokens/s (batch {B}x{T})")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
