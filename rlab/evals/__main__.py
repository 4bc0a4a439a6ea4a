"""`python -m rlab.evals EVAL_RUN_JSON` (or under torchrun): the eval worker; see rlab.evals.runner."""

from __future__ import annotations

import logging
import os
import sys


def main(argv: list[str]) -> int:
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING,
        format=f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s",
    )
    if len(argv) != 1:
        logging.getLogger("rlab.evals").error("usage: python -m rlab.evals EVAL_RUN_JSON")
        return 2
    from rlab.core.distributed import shutdown_distributed
    from rlab.errors import RlabError
    from rlab.evals.runner import run_evals
    from rlab.spec.run import EvalRunConfig, read_config

    try:
        run_evals(read_config(argv[0], EvalRunConfig))
    except RlabError as exc:
        logging.getLogger("rlab.evals").error("%s", exc)
        return 1
    finally:
        shutdown_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
