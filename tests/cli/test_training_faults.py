"""The faults a long GPU job meets, on 2 CPU ranks under torchrun (gloo) with the tiny smoke model.

Each test injects one failure (a killed agent, a full disk, fewer processes on resume) through the real CLI
and workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest

from rlab.orchestrate.lock import lock_holder
from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps
from rlab.records.metrics_log import read_metrics_records
from tests.cli.harness import processes_mentioning, run_process
from tests.cli.job_faults import (
    attack_when_training,
    continue_args,
    failure_summary,
    fill_disk,
    long_run,
    long_run_tag,
    resume_args,
    small_tmpfs,
    start_job,
    stop_rank,
    torchrun_agent,
)
from tests.orchestrate.helpers import pretrained_smoke_base, write_spec

pytestmark = pytest.mark.slow


def test_sigkill_of_the_torchrun_agent_alone_leaves_no_worker_and_no_later_checkpoint(
    tiny_base_dir, tmp_path
):
    """The OOM killer's choice: the agent dies, the workers (each in its own session) must not train on,
    and the tag's lock is free only once no process of the job is left."""
    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    results = tmp_path / "drill-results"
    layout, tag = ExperimentLayout(results, "drill"), long_run_tag()
    proc = start_job(*continue_args(write_spec(tmp_path, long_run()), base_dir, results))

    def kill_the_agent() -> int:
        job = len(processes_mentioning(str(layout.run_config(tag))))
        os.kill(torchrun_agent(layout.run_config(tag)), signal.SIGKILL)
        return job

    stderr, job = attack_when_training(proc, layout, tag, kill_the_agent)
    assert job == 3  # the agent and two workers
    assert proc.returncode == 1 and "Traceback" not in stderr
    assert "1 of 1 job(s) failed: smoke-drill-pi" in " ".join(stderr.split())
    # issue 42, finding 6: the summary says how the agent ended
    assert "the job's launcher (torchrun) was killed by SIGKILL (signal 9)" in " ".join(stderr.split())
    # the moment rlab has exited (the lock with it), no process of the job is left ...
    assert processes_mentioning(str(layout.run_config(tag))) == []
    assert lock_holder(BaseLayout(base_dir), tag) is None
    steps = checkpoint_steps(BaseLayout(base_dir).checkpoint_dir(tag))
    time.sleep(3)
    # ... and nothing writes to the tag afterwards
    assert checkpoint_steps(BaseLayout(base_dir).checkpoint_dir(tag)) == steps
    records = [json.loads(line) for line in layout.metrics_file(tag).read_text().splitlines()]
    assert max(r.get("step", 0) for r in records) <= max(steps) + 2


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (needs root and a kernel that allows the mount; skipped elsewhere)."""
    with small_tmpfs(tmp_path / "small", "16m") as mount:
        if mount is None:
            pytest.skip("cannot mount a small tmpfs here")
        yield mount


def test_a_full_disk_is_one_named_error_and_the_run_resumes_exactly_after(
    tiny_base_dir, tmp_path, small_disk
):
    """The disk fills while the job trains: the summary names rank 0's "No space left" and the file (not rank 1's
    "Connection closed by peer"), as text, without a traceback; freed, --resume goes on from the last checkpoint."""

    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    small_base = small_disk / "base"
    shutil.copytree(base_dir, small_base)
    results = tmp_path / "disk-results"
    layout, tag = ExperimentLayout(results, "drill"), long_run_tag()
    proc = start_job(*continue_args(write_spec(tmp_path, long_run()), small_base, results))
    stderr, filler = attack_when_training(proc, layout, tag, lambda: fill_disk(small_disk), timeout=180)
    said = failure_summary(stderr)
    assert proc.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr and "MarkupError" not in stderr
    assert f"{tag}: No space left writing {small_base / 'base_checkpoints' / tag}" in said, stderr[-3000:]
    assert "Connection closed by peer" not in said
    steps = checkpoint_steps(BaseLayout(small_base).checkpoint_dir(tag))
    filler.unlink()
    resumed = run_process(*resume_args(layout, tag, small_base, results, after=max(steps)))
    assert resumed.code == 0, resumed.err[-3000:]
    assert max(checkpoint_steps(BaseLayout(small_base).checkpoint_dir(tag))) == max(steps) + 2


def test_a_resume_on_fewer_processes_keeps_the_global_batch(tiny_base_dir, tmp_path):
    """Trained on 2 ranks (512 tokens/step), resumed on 1: the console says the batch is kept by 2 accumulation
    steps, and the resumed steps train 512 tokens each (not half as many)."""
    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    results = tmp_path / "ws-results"
    layout, tag = ExperimentLayout(results, "drill"), long_run_tag()
    spec = write_spec(tmp_path, long_run(steps=2))
    first = run_process(*continue_args(spec, base_dir, results, nproc=2))
    assert first.code == 0, first.err[-3000:]
    resumed = run_process(*continue_args(spec, base_dir, results, nproc=1), "--resume", "--steps", "4")
    assert resumed.code == 0, resumed.err[-3000:]
    assert "the global batch stays 512 tokens/step, by 2 gradient accumulation step(s)" in " ".join(
        resumed.err.split()
    )
    records = [json.loads(line) for line in layout.metrics_file(tag).read_text().splitlines()]
    tokens = {r["step"]: r["tokens"] for r in records if r["type"] == "train"}
    assert sorted(tokens) == [5, 6, 7, 8]
    assert [tokens[s] - tokens.get(s - 1, 0) for s in (5, 6, 7, 8)] == [512, 512, 512, 512]
    assert "x 1 ranks x 2 accum = 512 tokens/step" in layout.train_log(tag).read_text()


def test_a_frozen_rank_ends_the_job_in_one_line_naming_it_and_the_run_resumes_after(tiny_base_dir, tmp_path):
    """Issue 42, finding 1: `kill -STOP` of one worker hung the job silently (`rlab status`: training 40/80) until
    the 30-minute collective timeout. Each rank heartbeats; one silent past train.stall_timeout_s (+ the slowest
    step) ends the job with a line naming it and its last step, and `rlab status` says stalled since when."""
    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    results = tmp_path / "stall-results"
    layout, tag = ExperimentLayout(results, "drill"), long_run_tag()
    spec = write_spec(tmp_path, long_run(stall_timeout_s=10))
    proc = start_job(*continue_args(spec, base_dir, results))
    # 120 s: 3 x 10 s would be the collective's own timeout
    stderr, _ = attack_when_training(proc, layout, tag, lambda: stop_rank(layout, tag, 1, signal.SIGSTOP))
    said = failure_summary(stderr)
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert processes_mentioning(str(layout.run_config(tag))) == []  # the stopped worker killed too
    assert f"{tag}: stalled since " in said and "(rank 1 at step " in said and "silent for" in said, said
    status = run_process("status", "--base-dir", str(base_dir), "--results-dir", str(results), columns=300)
    assert f"{tag}: stalled since " in status.out and "(rank 1 at step " in status.out, status.out
    steps = checkpoint_steps(BaseLayout(base_dir).checkpoint_dir(tag))
    resumed = run_process(*resume_args(layout, tag, base_dir, results, after=max(steps)))
    assert resumed.code == 0, resumed.err[-3000:]
    assert max(checkpoint_steps(BaseLayout(base_dir).checkpoint_dir(tag))) == max(steps) + 2


def test_rank_0_killed_is_the_cause_named_not_rank_1s_lost_connection(tiny_base_dir, tmp_path):
    """Issue 42, finding 6: rank 0 SIGKILLed (as during a save): the summary showed rank 1's gloo "Connection
    closed by peer"; it names rank 0 and the signal first."""
    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    results = tmp_path / "kill-results"
    layout, tag = ExperimentLayout(results, "drill"), long_run_tag()
    proc = start_job(*continue_args(write_spec(tmp_path, long_run()), base_dir, results))
    stderr, _ = attack_when_training(proc, layout, tag, lambda: stop_rank(layout, tag, 0, signal.SIGKILL))
    said = failure_summary(stderr)
    assert proc.returncode == 1 and f"{tag}: rank 0 was killed by SIGKILL (signal 9)" in said, stderr[-3000:]


def test_a_full_results_disk_names_the_file_and_its_filesystems_free_space_and_tears_no_line(
    tiny_base_dir, tmp_path, small_disk
):
    """Issue 42, finding 5: "No space left writing a file (71 GiB free there)": no file, the root disk's free
    space, and metrics.jsonl left with a torn last line. Now: the file, the full filesystem's free space, whole
    lines only."""

    base_dir, _ = pretrained_smoke_base(tiny_base_dir, tmp_path)
    results = small_disk / "results"
    layout, tag = ExperimentLayout(results, "drill"), long_run_tag()
    proc = start_job(*continue_args(write_spec(tmp_path, long_run()), base_dir, results))
    stderr, filler = attack_when_training(proc, layout, tag, lambda: fill_disk(small_disk), timeout=180)
    said = failure_summary(stderr)
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert f"{tag}: No space left writing {results}" in said, said
    free = said.split(" free there")[0].rsplit("(", 1)[-1].split(", ")[-1]
    assert free.endswith((" B", " KiB")), said  # the tmpfs's few bytes, not another disk's GiB
    metrics = layout.metrics_file(tag)
    assert metrics.read_bytes().endswith(b"\n") and read_metrics_records(metrics)
    filler.unlink()
    shutil.rmtree(small_disk / "results", ignore_errors=True)
