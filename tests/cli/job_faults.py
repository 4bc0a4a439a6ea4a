"""A long training job to break and the means to break it, defined once for the training-fault tests
(`tests/cli/test_training_faults.py`) and the fault-drill probe (`experiments/probes/fault_drill.py`, which
reruns those attacks and more and prints what rlab does).

The job is `rlab continue` of variant pi on the smoke base (`tests.orchestrate.helpers.pretrained_smoke_base`)
at 2 CPU ranks under torchrun (gloo), saving every 2 steps, with steps enough to run until it is stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from rlab.paths import ExperimentLayout, heartbeat_file
from rlab.records.heartbeat import Heartbeat
from tests.cli.harness import REPO, processes_mentioning, start_process
from tests.conftest import default_sigint
from tests.orchestrate.helpers import spec_args

LONG_RUN = """name: {name}
base: {{tag: smoke, step: 4}}
train: {{seq_len: 128, steps: {steps}, device_batch_size: 2, eval_every: never, save_every: 2, keep_last: 3,
        eval_tokens: 1024, lr: {{warmup_steps: 1}}{extra}}}
variants:
  pi: {{variant: pi, factor: 4.0}}
"""
"""The job's spec (`long_run` fills in the experiment name and steps); 2 ranks x 2 rows x 128 = 512 tokens/step."""


def long_run(name: str = "drill", steps: int = 100_000, **train: object) -> str:
    """The job's spec text for experiment `name` (`train`: more train.* settings, e.g. stall_timeout_s=5)."""
    extra = "".join(f", {key}: {value}" for key, value in train.items())
    return LONG_RUN.format(name=name, steps=steps, extra=extra)


def long_run_tag(name: str = "drill") -> str:
    """The tag the job trains."""
    return f"smoke-{name}-pi"


def continue_args(spec: Path | str, base: Path | str, results: Path | str, nproc: int = 2) -> list[str]:
    """`rlab continue` of the job's one variant."""
    return [
        "continue",
        *spec_args(spec, base, results),
        "--variants",
        "pi",
        "--no-control",  # the one job to break (the control arm would train first)
        "--nproc",
        str(nproc),
    ]


BASE_STEP = 4
"""The smoke base's step: a run's `--steps` count from it."""

T = TypeVar("T")


def resume_args(
    layout: ExperimentLayout, tag: str, base: Path | str, results: Path | str, after: int
) -> list[str]:
    """`rlab continue --resume` of the job from its own saved spec, to two steps past step `after`."""
    more = after + 2 - BASE_STEP
    return [*continue_args(layout.tag_spec(tag), base, results), "--resume", "--steps", str(more)]


def failure_summary(stderr: str) -> str:
    """What the job's failure summary says, on one line: from "job(s) failed" to the rerun command ("" if none)."""
    said = " ".join(stderr.split())
    if "job(s) failed" not in said:
        return ""
    return said[said.find("job(s) failed") :].split("Rerun just these")[0]


def start_job(*args: str, cwd: Path | None = REPO, columns: int = 200) -> subprocess.Popen[str]:
    """`rlab ARGS...` started in a session of its own (its process group can be killed whole), its output
    piped, Ctrl-C delivered as a terminal would."""
    return start_process(
        *args,
        cwd=cwd,
        columns=columns,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill what is left of a job started by `start_job` (its whole session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise TimeoutError(f"timed out after {seconds:g} s waiting for {what}")


def attack_when_training(
    proc: subprocess.Popen[str],
    layout: ExperimentLayout,
    tag: str,
    attack: Callable[[], T],
    timeout: float = 120,
) -> tuple[str, T]:
    """Once the job has trained a step, `attack()` it and wait for it to end (what is left is killed); returns
    the job's stderr and what the attack returned."""
    try:
        wait_for_training(layout, tag)
        done = attack()
        _, stderr = proc.communicate(timeout=timeout)
    finally:
        stop(proc)
    return stderr, done


def trained_a_step(layout: ExperimentLayout, tag: str) -> bool:
    metrics = layout.metrics_file(tag)
    return metrics.exists() and '"train"' in metrics.read_text()


def wait_for_training(layout: ExperimentLayout, tag: str, seconds: float = 240) -> None:
    wait_for(lambda: trained_a_step(layout, tag), seconds, f"{tag} to log a step")


def program(pid: int) -> str:
    """The program a process runs (`torchrun` for a job's agent; its workers run `-m rlab.core.train`)."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return Path(argv[1].decode()).name if len(argv) > 1 else ""


def torchrun_agent(run_json: Path) -> int:
    """The pid of the torchrun agent of the job whose run.json is `run_json`."""
    (agent,) = [p for p in processes_mentioning(str(run_json)) if program(p) == "torchrun"]
    return agent


def worker_pid(run_json: Path, rank: int) -> int:
    """The pid of the job's worker of `rank`, from its heartbeat (`rlab.records.heartbeat`)."""
    beat = Heartbeat.model_validate_json(heartbeat_file(run_json.parent, rank).read_bytes())
    return beat.pid


def stop_rank(layout: ExperimentLayout, tag: str, rank: int, signum: signal.Signals) -> None:
    """Send `signum` to the job's worker of `rank` once it has written its heartbeat (SIGSTOP freezes it)."""
    beat = heartbeat_file(layout.run_dir(tag), rank)
    wait_for(beat.exists, 60, f"rank {rank}'s heartbeat")
    os.kill(worker_pid(layout.run_config(tag), rank), signum)


def fill_disk(folder: Path) -> Path:
    """Take every free byte of the filesystem under `folder`; returns the file that holds them."""
    filler = folder / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 20))
                fh.flush()
        except OSError:
            pass
    return filler


@contextmanager
def small_tmpfs(folder: Path, size: str) -> Iterator[Path | None]:
    """`folder` as a tmpfs of `size` (e.g. "16m") while the block runs; None where it cannot be mounted (root
    and a kernel that allows the mount are needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        yield None
        return
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)  # a leftover mount
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]).returncode:
        yield None
        return
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
