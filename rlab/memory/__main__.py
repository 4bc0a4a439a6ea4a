"""`python -m rlab.memory`: the plan of one training shape, JSON in on stdin, JSON out on stdout.

    echo '{"shape": {...TrainShape...}, "gpu_memory_gib": 80}' | python -m rlab.memory

What the trainer runs, in a fresh CPU-only process, to put the memory plan's suggestion into an
out-of-memory error (`rlab.core.step_failures`). People use `rlab memory`.
"""

from __future__ import annotations

import json
import sys

from rlab.memory.plan import plan_training
from rlab.memory.shape import TrainShape


def main() -> int:

    request = json.loads(sys.stdin.read())
    plan = plan_training(TrainShape.model_validate(request["shape"]), float(request["gpu_memory_gib"]))
    sys.stdout.write(plan.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
