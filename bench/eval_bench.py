"""Eval throughput: CORE examples/s batched vs one example per forward (same tasks, same answers),
and BPB tokens/s, on random GPTs with BPE tokenizers trained on bundle text.

    python -m bench eval                                  # both model configs below
    python -m bench.eval_bench --configs realistic --threads 2 --per-task 32
    python -m bench.eval_bench --device cuda --configs realistic
    python -m bench.eval_bench --configs realistic --seq-len 2048   # few-shot prompts uncropped

Two model shapes (random weights; throughput does not depend on what the weights are):
  tiny       2 layers, width 64, vocab 1024, seq 256: the test-suite scale, where per-forward
             overhead and attention dominate;
  realistic  4 layers, width 256, vocab 8192, seq 512: the lm_head is a large share of the work, as
             it is for real nanochat models (d20: vocab 65536, width 1280). At 512 tokens the
             10-shot prompts are cropped from the left, each choice on its own, so they share nothing.
  realistic-2048  the same model at the context nanochat's base models train at (2048), where the
             few-shot prompts fit whole and an example's choices share their prompt.

One-at-a-time is the reference definition (one example per forward, full logits at every
position); batched packs each example's shared prefix once, batches many examples per forward and
runs the last block and the lm_head only at scored positions. The machine may be shared, so the
two paths are run interleaved task by task in the same process, and the figure to quote is their
ratio. Times include prompt rendering and tokenization, which both paths do identically. The
verdicts are compared example by example.

The `ceiling` column bounds what any exact batched scorer can reach on a task: one-at-a-time time
divided by the time the batched path spends in all blocks but the last (timed by forward hooks).
Those blocks must run over every token of every sequence, each shared prefix once (their outputs
feed later keys and values; only the last block and the lm_head can be limited to the scored
positions), and the one-at-a-time path runs them too, over at least as many tokens. Padding is
counted in, so the bound is for this batching. Where prompts share nothing (language_modeling
tasks, prompts cropped from the left) it is low: the batched path saves only the last block and
the lm_head away from the scored positions.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from rlab.core.gpt import GPT, GPTConfig
from rlab.core.tokenizer import Tokenizer
from rlab.evals.bpb.score import score_documents
from rlab.evals.core.bundle import load_bundle, load_task_data
from rlab.evals.core.metric import evaluate_task, subsample
from rlab.paths import default_base_dir, find_eval_bundle

TESTS_BUNDLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "eval_bundle"
TASKS = (
    "copa",
    "winograd",
    "arc_easy",
    "hellaswag_zeroshot",
    "hellaswag",
    "bigbench_operators",
    "lambada_openai",
)
CONFIGS = {
    "tiny": dict(layers=2, width=64, vocab=1024, seq_len=256),
    "realistic": dict(layers=4, width=256, vocab=8192, seq_len=512),
    "realistic-2048": dict(layers=4, width=256, vocab=8192, seq_len=2048),
}


def _texts(bundle: Path, per_file: int = 400) -> list[str]:
    out = []
    for p in sorted((bundle / "eval_data").rglob("*.jsonl")):
        with p.open() as f:
            for i, line in enumerate(f):
                if i >= per_file:
                    break
                out.extend(str(v) for v in json.loads(line).values())
    return out


def _model(layers: int, width: int, vocab: int, seq_len: int, device):

    torch.manual_seed(0)
    heads = max(1, width // 64) if width >= 128 else 2
    cfg = GPTConfig(
        sequence_len=seq_len, vocab_size=vocab, n_layer=layers, n_head=heads, n_kv_head=heads, n_embd=width
    )
    model = GPT(cfg)
    model.init_weights()
    with torch.no_grad():  # init_weights zeroes the output layers; make every prediction input-dependent
        model.lm_head.weight.normal_(0, 0.5)
        for b in model.transformer.h:
            b.attn.c_proj.weight.normal_(0, 0.3)
            b.mlp.c_proj.weight.normal_(0, 0.3)
    return model.to(device).eval()


def bench_config(name: str, args, texts: list[str], device) -> tuple[float, bool]:
    """One model config: per-task table; returns (overall speedup, all verdicts identical)."""

    c = dict(CONFIGS[name], **({"seq_len": args.seq_len} if args.seq_len else {}))
    t0 = time.perf_counter()
    tok = Tokenizer.train(texts, vocab_size=c["vocab"])
    model = _model(c["layers"], c["width"], tok.vocab_size, c["seq_len"], device)
    print(
        f"\n[{name}] {c['layers']} layers, width {c['width']}, vocab {tok.vocab_size}, seq {c['seq_len']}, "
        f"{model.num_params() / 1e6:.1f}M params, device {device}, torch threads {torch.get_num_threads()} "
        f"(tokenizer trained in {time.perf_counter() - t0:.1f}s)"
    )

    bundle = load_bundle(args.bundle)
    data = {}
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for label in tasks:
        task = bundle.task(label)
        data[label] = (task, *subsample(load_task_data(task), args.per_task))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    # Time spent in every block but the last: layer compute that any exact scorer does over every
    # token it keeps (the last block and the lm_head are needed at scored positions only).
    early_blocks = list(model.transformer.h)[:-1]
    in_early = [0.0]

    def enter(_module, _inputs):
        sync()
        in_early.append(time.perf_counter())

    def leave(_module, _inputs, _output):
        sync()
        in_early[0] += time.perf_counter() - in_early.pop()

    for block in early_blocks:
        block.register_forward_pre_hook(enter)
        block.register_forward_hook(leave)

    def run(label: str, batched: bool):
        task, rows, order = data[label]
        in_early[0] = 0.0
        t0 = time.perf_counter()
        verdicts = evaluate_task(
            model,
            tok,
            task,
            rows,
            device,
            source_indices=order,
            max_seq_len=c["seq_len"],
            batch_tokens=args.batch_rows * c["seq_len"],
            batched=batched,
        )
        sync()
        return verdicts, time.perf_counter() - t0, in_early[0]

    run(tasks[0], True)  # warm-up (allocator, kernels)
    run(tasks[0], False)
    print(f"  CORE, {args.per_task} examples per task; one-at-a-time and batched interleaved per task")
    print(
        f"  ceiling = one-at-a-time time / time the batched path spends in blocks 1..{len(early_blocks)} of "
        f"{len(early_blocks) + 1} over its rows (shared prefixes once, padding included)"
    )
    print(
        f"  {'task':<20}{'type':<18}{'shots':>5}{'one-at-a-time ex/s':>20}{'batched ex/s':>14}{'speedup':>9}"
        f"{'ceiling':>9}  identical verdicts"
    )
    total_single = total_batched = total_floor = 0.0
    n_total, all_same = 0, True
    for label in tasks:
        single, t_single, _ = run(label, False)
        batched, t_batched, t_floor = run(label, True)
        same = single == batched
        n = len(single)
        n_total, all_same = n_total + n, all_same and same
        total_single, total_batched, total_floor = (
            total_single + t_single,
            total_batched + t_batched,
            total_floor + t_floor,
        )
        task = data[label][0]
        print(
            f"  {label:<20}{task.task_type:<18}{task.num_fewshot:>5}{n / t_single:>20.1f}{n / t_batched:>14.1f}"
            f"{t_single / t_batched:>8.1f}x{t_single / t_floor:>8.1f}x  {'yes' if same else 'NO'}"
        )
    speedup = total_single / total_batched
    print(
        f"  {'all':<20}{'':<18}{'':>5}{n_total / total_single:>20.1f}{n_total / total_batched:>14.1f}"
        f"{speedup:>8.1f}x{total_single / total_floor:>8.1f}x  {'yes' if all_same else 'NO'}"
    )
    print(f"  batched time in blocks 1..{len(early_blocks)}: {total_floor / total_batched:.0%}")

    # BPB as `rlab eval` scores it (whole documents in windows of the training length, the lm_head at
    # counted positions only): random documents of T + 1 tokens, B windows per forward.
    B, T, steps = args.batch_rows, c["seq_len"], 4
    g = torch.Generator().manual_seed(0)
    docs = [torch.randint(0, tok.vocab_size, (T + 1,), generator=g).tolist() for _ in range(B * steps)]
    token_bytes = tok.token_bytes().to(device=device, dtype=torch.long)
    score_documents(model, docs[:B], T, token_bytes, B * T)  # warm-up
    sync()
    t0 = time.perf_counter()
    res = score_documents(model, docs, T, token_bytes, B * T)
    sync()
    dt = time.perf_counter() - t0
    print(f"  BPB: {res.tokens} tokens in {dt:.2f}s = {res.tokens / dt:,.0f} tokens/s (batch {B}x{T})")
    return speedup, all_same


def main(argv: list[str]) -> None:

    ap = argparse.ArgumentParser(prog="bench.eval_bench")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads; 0 = torch's default")
    ap.add_argument(
        "--configs", default="realistic,realistic-2048,tiny", help=f"comma-separated, from {sorted(CONFIGS)}"
    )
    ap.add_argument("--per-task", type=int, default=16)
    ap.add_argument("--tasks", default=",".join(TASKS), help="comma-separated CORE task labels")
    ap.add_argument("--batch-rows", type=int, default=8, help="rows of seq-len tokens per batched forward")
    ap.add_argument(
        "--seq-len",
        type=int,
        default=0,
        help="override the configs' context (prompts longer than it are cropped from the left); 0 = theirs",
    )
    ap.add_argument(
        "--bundle",
        type=Path,
        default=None,
        help="CORE bundle; default the one rlab eval would read, else the tests' subset (40 rows a task)",
    )
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.bundle is None:
        args.bundle = find_eval_bundle(default_base_dir()) or TESTS_BUNDLE
    texts = _texts(args.bundle)
    summary = []
    for name in args.configs.split(","):
        speedup, same = bench_config(name.strip(), args, texts, device)
        summary.append(f"{name.strip()} {speedup:.1f}x (identical verdicts: {'yes' if same else 'no'})")
    print(f"\nCORE batched vs one-at-a-time, overall: {'; '.join(summary)}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
