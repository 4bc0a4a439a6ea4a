"""A throw-away single-node SLURM cluster (munged + slurmctld + slurmd on 127.0.0.1) for tests.

All state lives in one temp folder that `SLURM_CONF` points to; the daemons run in the
foreground as our children and are stopped by PID. `unavailable_reason()` says why a cluster
cannot be brought up here (not root, packages missing and not installable, ...).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
APT_TIMEOUT_S = 240


def _missing() -> list[str]:
    return [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]


def unavailable_reason() -> str | None:
    """None when a cluster can be started; otherwise why not (installing slurm-wlm + munge if root)."""
    if not _missing():
        return None
    if os.geteuid() != 0:
        return f"SLURM not installed ({', '.join(_missing())} missing) and not root to apt-get install slurm-wlm munge"
    if shutil.which("apt-get") is None:
        return "SLURM not installed and no apt-get to install slurm-wlm munge"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "slurm-wlm", "munge"]
    try:
        result = subprocess.run(install, capture_output=True, text=True, timeout=APT_TIMEOUT_S, env=env)
        if result.returncode != 0:  # a fresh machine has no package lists yet
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=APT_TIMEOUT_S, env=env)
            result = subprocess.run(install, capture_output=True, text=True, timeout=APT_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return f"apt-get install slurm-wlm munge took more than {APT_TIMEOUT_S}s"
    if result.returncode != 0 or _missing():
        return f"apt-get install slurm-wlm munge failed: {result.stderr.strip()[-300:]}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _exe(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class SlurmCluster:
    """`with SlurmCluster(tmp) as env:` — env holds SLURM_CONF for sbatch/squeue/scontrol."""

    def __init__(self, root: Path, cpus: int = 2) -> None:
        self.root = root
        self.cpus = cpus
        self.procs: list[subprocess.Popen] = []
        self.env: dict[str, str] = {}

    def __enter__(self) -> dict[str, str]:
        r = self.root
        for sub in ("state", "spool", "munge"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = r / "munge" / "munge.socket"
        host = socket.gethostname()
        conf = r / "slurm.conf"
        conf.write_text(
            "\n".join(
                [
                    "ClusterName=rlabtest",
                    f"SlurmctldHost={host}(127.0.0.1)",
                    "SlurmUser=root",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={sock}",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_CPU",
                    "SchedulerType=sched/builtin",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "JobCompType=jobcomp/none",
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "MinJobAge=600",
                    f"NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=1000 State=UNKNOWN",
                    f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        self.env = {"SLURM_CONF": str(conf)}
        env = {**os.environ, **self.env}
        log = open(r / "daemons.out", "ab")
        try:
            self._start(
                [
                    _exe("munged"),
                    "--foreground",
                    "--force",
                    f"--socket={sock}",
                    f"--key-file={key}",
                    f"--pid-file={r / 'munge' / 'munged.pid'}",
                    f"--log-file={r / 'munge' / 'munged.log'}",
                    f"--seed-file={r / 'munge' / 'munged.seed'}",
                ],
                env,
                log,
            )
            self._wait(lambda: sock.exists(), "munged socket")
            self._start([_exe("slurmctld"), "-D", "-i", "-f", str(conf)], env, log)
            self._start([_exe("slurmd"), "-D", "-f", str(conf), "-N", host], env, log)
            self._wait(lambda: self._node_idle(env), "the node to become idle")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.env

    def _start(self, argv: list[str], env: dict[str, str], log) -> None:
        self.procs.append(
            subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def _wait(self, ok, what: str, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if ok():
                return
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead[0]} exited; see {self.root}/daemons.out and the *.log files")
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; see {self.root}")

    @staticmethod
    def _node_idle(env: dict[str, str]) -> bool:
        out = subprocess.run(
            [_exe("sinfo"), "-h", "-o", "%t"], env=env, capture_output=True, text=True
        ).stdout
        return out.strip() in ("idle", "mix", "alloc")

    def __exit__(self, *exc) -> None:
        for proc in reversed(self.procs):  # slurmd, slurmctld, munged: by PID, never by name
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self.procs.clear()


def wait_for_job(job_id: str, env: dict[str, str], timeout: float = 180.0) -> str:
    """Poll scontrol until the job leaves the queue; returns its final JobState."""
    deadline = time.time() + timeout
    state = "UNKNOWN"
    while time.time() < deadline:
        out = subprocess.run(
            [_exe("scontrol"), "show", "job", job_id],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
        ).stdout
        for field in out.split():
            if field.startswith("JobState="):
                state = field.split("=", 1)[1]
        if state in (
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "BOOT_FAIL",
        ):
            return state
        time.sleep(0.5)
    return f"TIMEOUT_WAITING({state})"
