"""Build torchrun command lines and run jobs as child processes, isolated from each other.

`torchrun_argv` is pure (tests compare it exactly). `device_slots` decides how jobs share
the GPUs: one job at a time on every device by default, or several at once on disjoint
``CUDA_VISIBLE_DEVICES`` sets when ``gpus_per_variant`` is smaller than what is visible.
`run_jobs` starts each job in its own process group with its output in its own log file,
keeps going when one fails, and on Ctrl-C (or any exception) terminates every group it
started before re-raising. Every job runs under `rlab.orchestrate.lifeline`, so it gets SIGTERM
when rlab dies by any signal, SIGKILL included; its workers die with their launcher (`rlab.worker`).
A job ends only once none of its processes is left: each job's environment carries a unique
``RLAB_JOB_ID``, and whatever still carries it when the launcher has exited is killed and waited
for (`rlab.orchestrate.job_processes`), wherever it was re-parented.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from rlab.errors import LaunchError
from rlab.orchestrate.job_processes import JOB_ENV, stop_job
from rlab.orchestrate.lifeline import lifeline_argv
from rlab.records.heartbeat import find_stall, read_heartbeats
from rlab.records.metrics_log import append_record
from rlab.spec.experiment import ExperimentSpec, LaunchSpec
from rlab.worker import ERROR_FILE_ENV, read_error_file

log = logging.getLogger(__name__)

TRAIN_MODULE = "rlab.core.train"
EVAL_MODULE = "rlab.evals"
TERMINATE_GRACE_S = 10.0


def rdzv_endpoint(launch: LaunchSpec, index: int) -> str:
    """``host:port`` of the index-th job's multi-node rendezvous (rdzv_port + index unless the endpoint has a port)."""
    host = launch.rdzv_endpoint or "127.0.0.1"
    if ":" in host:
        host, _, port = host.rpartition(":")
        return f"{host}:{int(port) + index}"
    return f"{host}:{launch.rdzv_port + index}"


def torchrun_argv(
    config_path: Path,
    launch: LaunchSpec,
    *,
    index: int = 0,
    rdzv_id: str = "rlab",
    module: str = TRAIN_MODULE,
) -> list[str]:
    """The exact torchrun command of one job (``torchrun ... -m MODULE CONFIG``).

    A single-node job without an explicit rdzv_endpoint runs ``--standalone``: torchrun binds a
    free port itself, so concurrent jobs (ours or anyone's) never collide on a port.
    """
    argv = [launch.torchrun]
    standalone = launch.nnodes == 1 and not launch.rdzv_endpoint
    if standalone:
        argv.append("--standalone")
    argv += [f"--nnodes={launch.nnodes}", f"--nproc-per-node={launch.procs_per_job}"]
    if launch.nnodes > 1:
        argv.append(f"--node-rank={launch.node_rank}")
    if not standalone:
        argv += [
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rdzv_endpoint(launch, index)}",
            f"--rdzv-id={rdzv_id}",
        ]
    argv += [f"--max-restarts={launch.max_restarts}", "-m", module, str(config_path)]
    return argv


def python_argv(config_path: Path, module: str) -> list[str]:
    """A single-process job without torchrun (``python -m MODULE CONFIG``)."""
    return [sys.executable, "-m", module, str(config_path)]


def format_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """A shell-ready rendering of a command, with its extra environment in front."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    command = shlex.join(argv)
    return f"{prefix} {command}" if prefix else command


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[str]:
    """Device ids this process may use: $CUDA_VISIBLE_DEVICES, else `nvidia-smi -L`, else none."""
    environ = os.environ if environ is None else environ
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return [d.strip() for d in value.split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, _ in enumerate(row for row in out.splitlines() if row.startswith("GPU "))]


def with_default_nproc(spec: ExperimentSpec, gpus: Sequence[str]) -> ExperimentSpec:
    """The spec with launch.nproc_per_node filled in when it was left null: every visible GPU, or 1 on CPU."""
    if spec.launch.nproc_per_node is not None:
        return spec
    launch = spec.launch.model_copy(update={"nproc_per_node": max(1, len(gpus))})
    return spec.model_copy(update={"launch": launch})


def device_slots(launch: LaunchSpec, gpus: Sequence[str]) -> list[tuple[str, ...] | None]:
    """Device sets that jobs run on concurrently; `None` = all visible devices (one job at a time).

    With no GPUs the workers are CPU processes (gloo) and jobs run one after another.
    """
    need = launch.procs_per_job
    if launch.gpus_per_variant is None:
        if gpus and launch.procs_per_job > len(gpus):
            raise LaunchError(
                f"Not enough devices: launch.nproc_per_node={launch.nproc_per_node} but {len(gpus)} GPU(s) are "
                f"visible ({', '.join(gpus)}).",
                f"Use --nproc {len(gpus)} or fewer.",
            )
        return [None]
    if not gpus:
        raise LaunchError(
            f"Not enough devices: launch.gpus_per_variant={need} needs GPUs, but none are visible.",
            "Remove gpus_per_variant to run on CPU (one job at a time), or check CUDA_VISIBLE_DEVICES.",
        )
    if need > len(gpus):
        raise LaunchError(
            f"Not enough devices: launch.gpus_per_variant={need} but only {len(gpus)} GPU(s) are visible "
            f"({', '.join(gpus)}).",
            f"Set gpus_per_variant to {len(gpus)} or fewer.",
        )
    return [tuple(gpus[i * need : (i + 1) * need]) for i in range(len(gpus) // need)]


def resolve_program(name: str) -> str:
    """Absolute path of `name` (torchrun): next to the running Python first, then on PATH."""
    if os.sep in name:
        if os.access(name, os.X_OK):
            return name
    else:
        beside = Path(sys.executable).parent / name
        if os.access(beside, os.X_OK):
            return str(beside)
        found = shutil.which(name)
        if found:
            return found
    raise LaunchError(
        f"{name} not found (looked next to {sys.executable} and on PATH).",
        "Install PyTorch in this environment (it provides torchrun), or set launch.torchrun to its path.",
    )


# --- running ------------------------------------------------------------------------------------------

JobStateName = Literal["pending", "running", "done", "failed", "interrupted", "submitted"]


@dataclass(frozen=True)
class Job:
    """One child process: its command, extra environment, and where its output goes."""

    tag: str
    variant: str
    argv: tuple[str, ...]
    log: Path
    metrics: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    heartbeats: Path | None = None
    """The folder its ranks heartbeat into (`rlab.records.heartbeat`): watched for a stalled rank while it runs."""
    error_file: Path | None = None
    """Where its first failing worker writes its error (`rlab.worker`): off the results disk, which may be the full
    one that swallowed the log's `error:` line."""

    def command(self, devices: tuple[str, ...] | None = None) -> str:
        return format_command(self.argv, {**self.env, **_device_env(devices)})


@dataclass
class JobState:
    """A job's progress through `run_jobs`."""

    job: Job
    state: JobStateName = "pending"
    returncode: int | None = None
    devices: tuple[str, ...] | None = None
    started: float | None = None
    ended: float | None = None
    pid: int | None = None
    stalled: str | None = None
    """Why the watchdog stopped it (`rlab.records.heartbeat.Stall.detail`), if it did."""
    reported: str | None = None
    """The error its first failing worker reported (`Job.error_file`), if any."""

    @property
    def seconds(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.time()) - self.started


def _device_env(devices: tuple[str, ...] | None) -> dict[str, str]:
    return {} if devices is None else {"CUDA_VISIBLE_DEVICES": ",".join(devices)}


def run_jobs(
    jobs: Sequence[Job],
    slots: Sequence[tuple[str, ...] | None] = (None,),
    *,
    on_tick: Callable[[list[JobState]], None] | None = None,
    poll_s: float = 0.5,
    grace_s: float = TERMINATE_GRACE_S,
    keep_fds: Mapping[str, int] | None = None,
) -> list[JobState]:
    """Run `jobs`, at most one per slot at a time; a failing job never stops the others.

    Returns every job's final state. On KeyboardInterrupt (or any other exception) all
    running process groups are terminated (SIGTERM, then SIGKILL after `grace_s`), the
    running jobs are marked interrupted, and the exception propagates. `keep_fds` maps a tag
    to a file descriptor its job inherits (the tag's lock, see `rlab.orchestrate.lock`).
    """
    states = [JobState(job) for job in jobs]
    pending = deque(states)
    free = list(slots)
    running: dict[int, tuple[JobState, subprocess.Popen, tuple[str, ...] | None, BinaryIO, str]] = {}
    try:
        while pending or running:
            while pending and free:
                state = pending.popleft()
                devices = free.pop(0)
                proc, fh, job_id = _start(state.job, devices, (keep_fds or {}).get(state.job.tag))
                state.state, state.devices, state.started, state.pid = (
                    "running",
                    devices,
                    time.time(),
                    proc.pid,
                )
                running[proc.pid] = (state, proc, devices, fh, job_id)
            for pid, (state, proc, devices, fh, job_id) in list(running.items()):
                code = proc.poll()
                if code is None:
                    if not stop_if_stalled(state, job_id):
                        continue
                    code = proc.wait()
                _kill_group(pid, signal.SIGKILL)
                stop_job(job_id)  # workers a crashed launcher left behind, in whatever session they are
                fh.close()
                state.reported = _reported_error(state.job)
                state.returncode, state.ended = code, time.time()
                state.state = "done" if code == 0 else "failed"
                log.info("%s finished with exit code %d", state.job.tag, code)
                del running[pid]
                free.append(devices)
            if on_tick is not None:
                on_tick(states)
            if pending or running:
                time.sleep(poll_s)
    except BaseException:
        terminate_all([proc for _, proc, _, _, _ in running.values()], grace_s)
        for state, proc, _, fh, job_id in running.values():
            stop_job(job_id)
            fh.close()
            state.state, state.returncode, state.ended = "interrupted", proc.returncode, time.time()
        if on_tick is not None:
            on_tick(states)
        raise
    return states


def _reported_error(job: Job) -> str | None:
    """The error the job's first failing worker wrote to `job.error_file` (message and hint), removing the file."""
    if job.error_file is None:
        return None

    reported = read_error_file(job.error_file)
    job.error_file.unlink(missing_ok=True)
    return None if reported is None else " ".join(part for part in reported if part)


def stop_if_stalled(state: JobState, job_id: str) -> bool:
    """The stall watchdog: when a rank of the job has been silent (or the job without a step) past its bound, kill
    the job, record why in its metrics (a `failed` record of kind `stalled`), and return True."""

    job = state.job
    if job.heartbeats is None or state.pid is None:
        return False
    now = time.time()
    stall = find_stall(read_heartbeats(job.heartbeats), now)
    if stall is None:
        return False
    state.stalled = stall.detail(now)
    log.warning("%s: %s; stopping the job", job.tag, state.stalled)
    _kill_group(state.pid, signal.SIGKILL)  # a stopped (SIGSTOP) process ignores SIGTERM until continued
    stop_job(job_id)
    if job.metrics is not None:
        append_record(
            job.metrics, {"type": "failed", "step": stall.step, "error": stall.describe(), "kind": "stalled"}
        )
    return True


def new_job_id() -> str:
    """A unique ``RLAB_JOB_ID`` for one launched job."""

    return uuid.uuid4().hex


def _start(
    job: Job, devices: tuple[str, ...] | None, keep_fd: int | None = None
) -> tuple[subprocess.Popen, BinaryIO, str]:

    job.log.parent.mkdir(parents=True, exist_ok=True)
    if job.heartbeats is not None:  # an earlier run's heartbeats would read as a stall
        for old in job.heartbeats.glob("rank*.json"):
            old.unlink(missing_ok=True)
    job_id = new_job_id()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **job.env, **_device_env(devices), JOB_ENV: job_id}
    if job.error_file is not None:
        job.error_file.unlink(missing_ok=True)
        env[ERROR_FILE_ENV] = str(job.error_file)
    fh = open(job.log, "ab")
    fh.write(f"# rlab: {job.command(devices)}\n".encode())
    fh.flush()
    try:
        proc = subprocess.Popen(
            lifeline_argv(job.argv),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # own process group: Ctrl-C reaches us only, and we stop the whole group
            pass_fds=() if keep_fd is None else (keep_fd,),  # the tag's lock lives as long as the job
        )
    except OSError as exc:
        fh.close()
        raise LaunchError(f"Cannot start {job.argv[0]} for {job.tag}: {exc.strerror}.") from None
    log.info("started %s (pid %d): %s", job.tag, proc.pid, job.command(devices))
    return proc, fh, job_id


def _kill_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def terminate_all(procs: Sequence[subprocess.Popen], grace_s: float = TERMINATE_GRACE_S) -> None:
    """SIGTERM every process group, wait up to `grace_s`, then SIGKILL what is left."""
    for proc in procs:
        _kill_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        _kill_group(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
            log.warning("process %d did not exit after SIGKILL", proc.pid)


def run_streaming(
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
    keep_in_log: Callable[[str], bool] | None = None,
) -> int:
    """Run one command in its own process group, teeing its output to `log_path` (and `on_line`);
    lines for which `keep_in_log` is false (progress events) go to `on_line` only.

    Returns the exit code once no process of the command is left; on KeyboardInterrupt the group is
    terminated and the interrupt re-raised.
    """

    log_path.parent.mkdir(parents=True, exist_ok=True)
    job_id = new_job_id()
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {}), JOB_ENV: job_id}
    with open(log_path, "ab") as fh:
        fh.write(f"# rlab: {format_command(argv, env)}\n".encode())
        try:
            proc = subprocess.Popen(
                lifeline_argv(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(f"Cannot start {argv[0]}: {exc.strerror}.") from None
        try:
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode(errors="replace").rstrip("\n")
                if keep_in_log is None or keep_in_log(line):
                    fh.write(raw)
                    fh.flush()
                if on_line is not None:
                    on_line(line)
            code = proc.wait()
            _kill_group(proc.pid, signal.SIGKILL)
            stop_job(job_id)  # workers a crashed launcher left behind
            return code
        except BaseException:
            terminate_all([proc])
            stop_job(job_id)
            raise
