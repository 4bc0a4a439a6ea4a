"""`python -m rlab.evals EVAL_RUN_JSON` (or under torchrun): the eval worker; see rlab.evals.runner."""

from __future__ import annotations

import sys
from pathlib import Path

from rlab.core.distributed import shutdown_distributed
from rlab.evals.runner import run_evals
from rlab.spec.run import EvalRunConfig, read_config
from rlab.worker import run_worker


def _evaluate(path: Path) -> None:

    finished = False
    try:
        run_evals(read_config(path, EvalRunConfig))
        finished = True
    finally:
        shutdown_distributed(synchronize=finished)


def main(argv: list[str]) -> int:

    return run_worker(argv, "python -m rlab.evals EVAL_RUN_JSON", _evaluate)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
