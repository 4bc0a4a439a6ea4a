"""A failed job's summary names its root cause as plain text: the first rank's own error, never a peer's
disconnect, and never rendered as markup."""

from __future__ import annotations

import subprocess
import sys

from rlab.orchestrate.watch import launcher_signal, worker_error
from tests.cli.harness import run_main
from tests.orchestrate.helpers import continue_from, launcher_spec, make_checkpoint, spec_args

FULL_DISK_LOG = """\
# rlab: torchrun --standalone --nnodes=1 --nproc-per-node=2 -m rlab.core.train run.json
2026-11-23 01:00:00 [rank 0] INFO rlab.core.train: step 10/60
Traceback (most recent call last):
  File "/x/rlab/core/train.py", line 633, in run
RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:61544
Traceback (most recent call last):
  File "/x/rlab/atomic_io.py", line 40, in write_bytes_atomic
OSError: [Errno 28] No space left on device: '/mnt/small/base_checkpoints/d2-pi/model_000012.pt.tmp'
E1123 01:00:01.000000 123 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1)
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: boilerplate
"""


def test_the_root_cause_is_not_a_peer_disconnect(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(FULL_DISK_LOG)
    assert worker_error(log) == (
        "OSError: [Errno 28] No space left on device: '/mnt/small/base_checkpoints/d2-pi/model_000012.pt.tmp'"
    )
    log.write_text(FULL_DISK_LOG + "error: No space left writing /mnt/small/x.pt (1 MiB to write).\n")
    assert (
        worker_error(log) == "No space left writing /mnt/small/x.pt (1 MiB to write)."
    )  # its own line first
    log.write_text(FULL_DISK_LOG.split("Traceback", 2)[0] + "Traceback" + FULL_DISK_LOG.split("Traceback")[1])
    assert "Connection closed by peer" in (worker_error(log) or "")  # all there is: still said


def test_a_worker_names_a_full_disk_in_one_line(tmp_path):
    program = (
        "import errno, sys\n"
        "from rlab.worker import run_worker\n"
        "def job(path):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device', str(path))\n"
        f"sys.exit(run_worker([{str(tmp_path / 'model_000012.pt')!r}], 'usage', job))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    (line,) = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert f"No space left writing {tmp_path / 'model_000012.pt'}" in line


def test_worker_lines_and_reasons_are_printed_as_text_not_markup(tmp_path):
    """A `[/]` in a worker's error line once ended in rich's MarkupError and a 61-line traceback."""
    make_checkpoint(tmp_path / "base", "d20", steps=(20,))
    spec = launcher_spec(
        tmp_path,
        "mk",
        'echo "[bold]progress[/] of [/broken]"\necho "error: cannot write /data/[run]/x.pt [/] (disk)"\nexit 1\n',
    )
    outcome = run_main(
        "continue", *spec_args(spec, tmp_path / "base", tmp_path / "res"), *continue_from(20, "pi")
    )
    assert outcome.exception is None and outcome.code == 1, outcome.text
    assert "Traceback" not in outcome.text
    assert "── d20-mk-pi failed (exit 1): cannot write /data/[run]/x.pt [/] (disk)" in outcome.err
    assert "  [bold]progress[/] of [/broken]" in outcome.err  # the log tail, verbatim
    # the summary's reason line names the first failed job (the control arm, d20-mk-rope, runs first)
    assert "d20-mk-rope: cannot write /data/[run]/x.pt [/] (disk)" in " ".join(outcome.err.split())


RANK0_KILLED_LOG = """\
# rlab: torchrun --standalone --nnodes=1 --nproc-per-node=2 -m rlab.core.train run.json
2026-11-28 09:13:50 [rank 0] INFO rlab.core.train: step 10/60
error: Distributed (gloo) error on rank 1 (host h, cpu) at step 12: [pair.cc:553] Connection closed by peer [127.0.0.1]:39128. One rank's failure stops them all.
W1128 09:13:52.632000 21812 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 21836 closing signal SIGTERM
E1128 09:13:52.697000 21812 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 0 (pid: 21835)
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
rlab.core.train FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-28_09:13:52
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 21836)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 21836
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-28_09:13:52
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 21835)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 21835
=======================================================
"""
"""torchrun 2.13's report of rank 0 SIGKILLed during a save: rank 1's own line is only the echo."""


def test_the_first_rank_that_failed_and_how_comes_before_a_peers_connection_error(tmp_path):
    """Finding 6: the user saw rank 1's gloo "Connection closed by peer", not that rank 0 was killed."""

    log = tmp_path / "train.log"
    log.write_text(RANK0_KILLED_LOG)
    assert worker_error(log) == (
        "rank 0 was killed by SIGKILL (signal 9) (the other ranks then lost their connection to it)"
    )
    own = RANK0_KILLED_LOG.replace(
        "error: Distributed", "error: No space left writing /r/metrics.jsonl.\nerror: D"
    )
    log.write_text(own)
    assert worker_error(log) == "No space left writing /r/metrics.jsonl."  # a rank's own reason stays first
    exited = RANK0_KILLED_LOG.split("error: ")[0] + RANK0_KILLED_LOG.split("\n", 3)[3].replace(
        "-9 (pid: 21835)  (SIGKILL)", "3 (pid: 21835)"
    )
    log.write_text(exited)
    assert worker_error(log) == "rank 0 exited with code 3"
    # the agent itself killed (the OOM killer's choice): the job's exit status says so
    assert launcher_signal(-9) == (
        "the job's launcher (torchrun) was killed by SIGKILL (signal 9); its workers stopped with it"
    )
    assert launcher_signal(1) is None and launcher_signal(0) is None
