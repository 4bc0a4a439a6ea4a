"""This rank's heartbeat: a daemon thread rewrites `heartbeats/rank<r>.json` every few seconds with the last step
the training loop finished, so rlab's watchdog can tell a frozen rank (no writes) from a stuck job (no steps).

The file format and the stall rule are `rlab.records.heartbeat`. A write that fails (a full disk) is logged once
and retried at the next beat: a heartbeat never fails a run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from rlab.atomic_io import write_text_atomic
from rlab.paths import heartbeat_file
from rlab.records.heartbeat import Heartbeat

logger = logging.getLogger("rlab.core.train")

MAX_INTERVAL_S = 5.0


class HeartbeatThread:
    """Beats from `start()` until `stop()`; the loop calls `stepped(step)` after each step, eval and save: the
    gaps between those calls (all but the first, which holds the setup and the first compile) are the phases whose
    slowest one the stall bound adds to train.stall_timeout_s."""

    def __init__(self, run_dir: Path, rank: int, step: int, stall_timeout_s: float) -> None:
        self.path = heartbeat_file(run_dir, rank)
        self.rank, self.step, self.timeout = rank, step, float(stall_timeout_s)
        self.step_time = time.time()
        self.slowest = 0.0
        self._calls = 0
        self.interval = min(MAX_INTERVAL_S, max(0.2, self.timeout / 5))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._warned = False
        self._thread = threading.Thread(target=self._run, name=f"rlab-heartbeat-{rank}", daemon=True)

    def start(self) -> HeartbeatThread:
        self.beat()
        self._thread.start()
        return self

    def stepped(self, step: int) -> None:
        now = time.time()
        with self._lock:
            if self._calls:
                self.slowest = max(self.slowest, now - self.step_time)
            self._calls += 1
            self.step, self.step_time = step, now

    def beat(self) -> None:
        with self._lock:
            record = Heartbeat(
                rank=self.rank,
                pid=os.getpid(),
                step=self.step,
                step_time=self.step_time,
                slowest_s=self.slowest,
                stall_timeout_s=self.timeout,
                time=time.time(),
            )
        try:
            write_text_atomic(self.path, record.model_dump_json())
        except OSError as exc:
            if not self._warned:
                logger.warning("cannot write heartbeat %s: %s", self.path, exc)
                self._warned = True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()

    def stop(self) -> None:
        """Stop beating and remove the file: a rank whose loop has ended (its process tearing down) is not silent."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 1)
        self.path.unlink(missing_ok=True)
