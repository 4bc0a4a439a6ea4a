"""Run every benchmark module in turn and print its figures.

Each module under `bench/` exposes `main(argv) -> None` and prints its own table. The machine
is shared and noisy, so every figure is reported as a ratio against a reference measured in
the same run (e.g. achieved FLOP/s over a matmul peak measured seconds before).

    python -m bench              # all benchmarks
    python -m bench train eval   # only these
    python -m bench --smoke      # every benchmark at a tiny size (make bench-smoke, in CI): they run, nothing more
    python -m bench gpu --seq-len 131072 --device-batch-size 1 --activation-checkpointing all   # one, with its flags
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "train": "bench.train_bench",
    "data": "bench.data_bench",
    "eval": "bench.eval_bench",
    "memory": "bench.memory_bench",
    "gpu": "bench.gpu_bench",  # says so and returns where there is no CUDA
    "window": "bench.window_bench",  # likewise
    "latency": "bench.latency_bench",  # CLI commands as ratios of `import torch`
}

# Arguments that make each benchmark tiny: `--smoke` checks that every benchmark still runs (in CI, on a
# 2-core CPU, within about two minutes in all); its figures mean nothing.
SMOKE = {
    "train": "--tiny --steps 4 --rounds 1 --loss-steps 6 --no-compile --threads 2 --variants rope,yarn,longrope",
    "data": "--tokens 20000 --batch-size 4 --seq-len 128",
    "eval": "--configs tiny --per-task 4 --tasks copa,lambada_openai --batch-rows 4",
    "memory": "--size tiny --eager-only",
    "gpu": "--cpu --steps 3 --activation-checkpointing all",  # the GPU bench's flow on the CPU (rlab's trainer only)
    "window": "--cpu",  # flex vs dense windows, forwards only at a tiny shape
    "latency": "--smoke",
}


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[0] in BENCHMARKS and argv[1] != "--smoke":  # one benchmark, its own flags
        importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:])
        return
    smoke = "--smoke" in argv
    names = [a for a in argv if a != "--smoke"] or list(BENCHMARKS)
    for name in names:
        module = importlib.import_module(BENCHMARKS[name])
        print(f"\n=== bench: {name}{' (smoke size)' if smoke else ''} ===", flush=True)
        module.main(SMOKE[name].split() if smoke else [])


if __name__ == "__main__":
    main(sys.argv[1:])
