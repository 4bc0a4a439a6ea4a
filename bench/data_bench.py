"""Data loader throughput: tokens/s of `TokenLoader`, against raw tokenizer speed, and its overlap with compute.

    python -m bench.data_bench                       # uses the prepared base dir, else a synthetic one
    python -m bench.data_bench --base-dir DIR --batch-size 8 --seq-len 512 --tokens 3000000

Figures printed:
* tokenizer: tokens/s of a plain batch encode of train text (the reference: the loader cannot beat it);
* loader: tokens/s delivered by `TokenLoader` (parquet read + tokenize + pack), and its ratio to the reference;
* overlap: a step of simulated compute (a matmul loop) with and without the loader feeding it. A ratio near
  1.0 means tokenization is hidden behind compute by the background thread.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

from rlab.core.loader import TokenLoader
from rlab.core.shards import split_shards
from rlab.core.tokenizer import Tokenizer
from rlab.data.prepare import PrepareOptions, prepare_data
from rlab.paths import BaseLayout, default_base_dir


def _synthetic_base(root: Path) -> Path:

    rng = random.Random(0)
    words = (
        "the of and to in a is that for it as was with be by on not he this are or his from at which but "
        "have an they you were her she there been one all we their has would when if so no will more"
    ).split()
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for i in range(400):
        text = " ".join(
            rng.choice(words) + ("." if rng.random() < 0.08 else "") for _ in range(rng.randint(300, 3000))
        )
        (corpus / f"{i}.txt").write_text(text)
    prepare_data(root / "base", [corpus], vocab_size=1024, options=PrepareOptions(shard_chars=400_000))
    return root / "base"


def main(argv: list[str]) -> None:

    parser = argparse.ArgumentParser(prog="bench.data_bench")
    parser.add_argument("--base-dir", type=Path, default=None)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=3_000_000, help="tokens to pull through the loader")
    parser.add_argument("--threads", type=int, default=2, help="tokenizer threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    tmp = None
    base = args.base_dir or default_base_dir()
    if not BaseLayout(base).corpus_manifest.is_file() and args.base_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="rlab-data-bench-")
        print(f"no prepared base dir at {base}; building a synthetic one")
        base = _synthetic_base(Path(tmp.name))
    layout = BaseLayout(base)
    tok = Tokenizer.from_directory(layout.tokenizer_dir)
    print(
        f"base dir {base}  vocab {tok.vocab_size}  B={args.batch_size} T={args.seq_len}  threads={args.threads}"
    )

    texts = pq.read_table(split_shards(layout.data_dir, "train")[0]).column("text").to_pylist()
    t0 = time.perf_counter()
    n_ref = sum(len(ids) for ids in tok.encode(texts, num_threads=args.threads))
    ref = n_ref / (time.perf_counter() - t0)
    chars = sum(map(len, texts))
    print(f"tokenizer  {ref:12,.0f} tokens/s  ({chars / n_ref:.2f} chars/token over {n_ref:,} tokens)")

    def run_loader(rank: int = 0, world: int = 1) -> float:
        loader = TokenLoader(
            layout.data_dir,
            tok,
            "train",
            args.batch_size,
            args.seq_len,
            rank=rank,
            world_size=world,
            seed=0,
            tokenizer_threads=args.threads,
        )
        next(loader)  # start-up (thread, first row group) is not throughput
        steps = max(1, args.tokens // (args.batch_size * args.seq_len))
        t = time.perf_counter()
        for _ in range(steps):
            next(loader)
        rate = steps * args.batch_size * args.seq_len / (time.perf_counter() - t)
        loader.close()
        return rate

    rate = run_loader()
    print(f"loader     {rate:12,.0f} tokens/s  ({rate / ref:.2f}x tokenizer)")
    rate2 = run_loader(rank=1, world=2)
    print(f"loader r1/2{rate2:12,.0f} tokens/s  (rank 1 of 2)")

    # Overlap: ~the per-step compute a tiny model does, with and without the loader in the loop.
    a = torch.randn(256, 256)
    steps = 60

    def compute() -> None:
        for _ in range(20):
            a @ a

    t = time.perf_counter()
    for _ in range(steps):
        compute()
    alone = time.perf_counter() - t
    loader = TokenLoader(
        layout.data_dir, tok, "train", args.batch_size, args.seq_len, seed=0, tokenizer_threads=args.threads
    )
    next(loader)
    t = time.perf_counter()
    for _ in range(steps):
        next(loader)
        compute()
    fed = time.perf_counter() - t
    loader.close()
    print(
        f"overlap    compute alone {alone / steps * 1e3:.1f} ms/step, with loader {fed / steps * 1e3:.1f} ms/step "
        f"(ratio {fed / alone:.2f})"
    )
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
