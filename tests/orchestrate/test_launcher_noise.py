"""The console filter for torchrun jobs, on lines torchrun 2.x really prints (captured from a failed eval)."""

from rlab.orchestrate.launcher_noise import LauncherNoiseFilter

FAILED_RUN = """\
W1123 01:55:21.858000 22921 torch/distributed/run.py:874] *****************************************
W1123 01:55:21.858000 22921 torch/distributed/run.py:874] Setting OMP_NUM_THREADS environment variable for each process
2026-11-23 01:55:25,646 [rank 0] INFO rlab.core.distributed: process group: backend gloo, world size 2
Traceback (most recent call last):
  File "/x/rlab/evals/bug.py", line 3, in <module>
ZeroDivisionError: division by zero
error: model_000400.pt: non-finite values (NaN/Inf) in transformer.h.0.mlp.c_fc.weight.
error: model_000400.pt: non-finite values (NaN/Inf) in transformer.h.0.mlp.c_fc.weight.
W1123 01:55:26.856000 22921 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 22927 closing signal
E1123 01:55:26.891000 22921 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 6, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
rlab.evals FAILED
  exitcode  : 1 (pid: 22892)
============================================================"""


def test_keeps_the_workers_output_and_drops_torchrun_s():
    noise = LauncherNoiseFilter()
    kept = [line for line in FAILED_RUN.splitlines() if noise.keep(line)]
    assert (
        kept
        == [
            "2026-11-23 01:55:25,646 [rank 0] INFO rlab.core.distributed: process group: backend gloo, world size 2",
            "Traceback (most recent call last):",  # a worker's own crash stays visible: it comes before the agent's
            '  File "/x/rlab/evals/bug.py", line 3, in <module>',
            "ZeroDivisionError: division by zero",
        ]
    )


def test_a_run_that_succeeds_loses_only_the_banner():
    noise = LauncherNoiseFilter()
    lines = [
        "W1123 01:55:21.858000 22921 torch/distributed/run.py:874] banner",
        "BPB at length 128: 4.16",
        "[rank 0] done",
    ]
    assert [line for line in lines if noise.keep(line)] == lines[1:]
