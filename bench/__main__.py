"""Run every benchmark module in turn and print its figures.

Each module under `bench/` exposes `main(argv) -> None` and prints its own table. The machine
is shared and noisy, so every figure is reported as a ratio against a reference measured in
the same run (e.g. achieved FLOP/s over a matmul peak measured seconds before).

    python -m bench              # all benchmarks
    python -m bench train eval   # only these
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
}


def main(argv: list[str]) -> None:
    names = argv or list(BENCHMARKS)
    for name in names:
        module = importlib.import_module(BENCHMARKS[name])
        print(f"\n=== bench: {name} ===", flush=True)
        module.main([])


if __name__ == "__main__":
    main(sys.argv[1:])
