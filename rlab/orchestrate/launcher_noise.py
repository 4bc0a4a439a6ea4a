"""Which lines of a torchrun job's live output a person needs to see.

torchrun's elastic agent writes its own lines around the workers': a banner about OMP_NUM_THREADS,
"Sending process N closing signal", and, when any worker exits non-zero, its own Python traceback
ending in a ChildFailedError box. None of that says what went wrong (the worker's `error: ...` line
does), and a traceback on a user error is what the CLI promises never to show. The log file keeps
every line; this filter only decides what is echoed to the terminal.
"""

from __future__ import annotations

import re

from rlab.orchestrate.watch import RANK_PREFIX

_AGENT_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S*torch/distributed/")
"""A line of torchrun's own logger (glog style: level, MMDD, time, pid, source file)."""
_AGENT_FAILED = "failed (exitcode"


class LauncherNoiseFilter:
    """`keep(line)`: False for the elastic agent's lines, for everything after it reports a failed worker
    (its traceback and ChildFailedError box), and for the workers' `error: ...` lines, one per rank, which
    the CLI renders once itself when the job has ended (`rlab.worker.read_error_file`, else
    `rlab.orchestrate.watch.worker_error` on the log)."""

    def __init__(self) -> None:
        self._failed = False

    def keep(self, line: str) -> bool:
        if self._failed:
            return False
        if _AGENT_LINE.match(line):
            self._failed = _AGENT_FAILED in line
            return False
        return not RANK_PREFIX.sub("", line.strip()).startswith("error: ")
