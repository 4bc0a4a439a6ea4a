"""`rlab continue` through the real entry point: errors, dry run, the clone->launch->summary pipeline.

Fast tests launch a stand-in "torchrun" (a real shell script set as launch.torchrun) so the whole
CLI path runs in a second; the slow test runs the real training worker under torchrun.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlab.orchestrate.clone import checkpoint_steps
from rlab.paths import BaseLayout, ExperimentLayout, meta_file, model_file
from tests.orchestrate.helpers import make_checkpoint, snapshot

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"


def rlab(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "rlab", *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=REPO)


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())
    for fragment in fragments:
        assert fragment in text, result.stderr


@pytest.fixture
def base(tmp_path) -> BaseLayout:
    make_checkpoint(tmp_path / "base", "d20", steps=(10, 20))
    return BaseLayout(tmp_path / "base")


def write_spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def fake_torchrun(tmp_path: Path, fail_on: str | None = None) -> Path:
    """A stand-in launcher: records its argv; exits 1 when its run.json path mentions `fail_on`."""
    script = tmp_path / "fake-torchrun"
    fail = f'case "$*" in *{fail_on}*) echo "worker crashed: CUDA error"; exit 1;; esac\n' if fail_on else ""
    script.write_text(f'#!/bin/sh\necho "launched $*"\n{fail}exit 0\n')
    script.chmod(0o755)
    return script


def test_dry_run_prints_the_8_gpu_commands_and_touches_nothing(tmp_path):
    result = rlab("continue", "--spec", str(EXPERIMENTS / "rope_scaling_d20.yaml"), "--dry-run")
    assert result.returncode == 0, result.stderr
    commands = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("torchrun")]
    assert len(commands) == 4
    results = Path(os.environ["RLAB_RESULTS_DIR"])
    assert commands[0] == (
        "torchrun --nnodes=1 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:29500 "
        f"--rdzv-id=d20-rope --max-restarts=0 -m rlab.core.train {results}/rope_scaling_d20/runs/d20-rope/run.json")
    assert [c.split("--rdzv-id=")[1].split()[0] for c in commands] == ["d20-rope", "d20-pi", "d20-ntk", "d20-yarn"]
    assert "does not exist" in result.stderr  # a note, not an error
    assert not results.exists() and not Path(os.environ["RLAB_BASE_DIR"]).exists()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--from-step", "15", "--variants", "pi"],
         ["No checkpoint for step 15 in", "(found: 10, 20).", "Choose one with --from-step."]),
        (["--from-step", "10", "--variants", "pi", "--base-tag", "d21"],
         ["Unknown base tag 'd21'. Did you mean 'd20'?", "--base-tag"]),
        (["--from-step", "10", "--variants", "pi,yarm"], ["Unknown variant 'yarm'. Did you mean 'yarn'?"]),
        (["--variants", "pi"], ["No base step to continue from.", "--from-step"]),
        (["--from-step", "10", "--variants", "pi", "--launcher", "k8s"], ["launch.launcher: Input should be"]),
    ],
)
def test_user_errors(base, args, fragments):
    before = snapshot(base.checkpoint_dir("d20"))
    assert_user_error(rlab("continue", "--base-dir", str(base.root), *args), *fragments)
    assert snapshot(base.checkpoint_dir("d20")) == before


def test_debug_env_shows_the_traceback(base):
    result = rlab("continue", "--base-dir", str(base.root), "--from-step", "15", "--variants", "pi",
                  env={"RLAB_DEBUG": "1"})
    assert result.returncode != 0 and "Traceback" in result.stderr and "CheckpointError" in result.stderr


def test_spec_errors_all_at_once(tmp_path):
    spec = write_spec(tmp_path, "base: {step: -1, tagg: x}\ntrain: {steps: -1}\nvariants:\n  pi: {variant: pi, "
                                "factor: 0.5}\n")
    result = rlab("continue", "--spec", str(spec), "--variants", "pi")
    assert_user_error(result, "4 problem(s)", "base.step:", "base.tagg: unknown key", "train.steps:",
                      "variants.pi.factor: must be >= 1 for variant 'pi' (got 0.5)")


def test_batch_arithmetic_error(base, tmp_path):
    spec = write_spec(tmp_path, "train: {seq_len: 1024, device_batch_size: 4, total_batch_size: 10000}\n"
                                "launch: {nproc_per_node: 2}\n")
    result = rlab("continue", "--spec", str(spec), "--base-dir", str(base.root), "--from-step", "10",
                  "--variants", "pi")
    assert_user_error(result, "train.total_batch_size: 10000 tokens is not a multiple of",
                      "4 x 1024 x 2 = 8192")


def test_torchrun_missing(base, tmp_path):
    spec = write_spec(tmp_path, "launch: {torchrun: no-such-torchrun}\n")
    result = rlab("continue", "--spec", str(spec), "--base-dir", str(base.root), "--from-step", "10",
                  "--variants", "pi")
    assert_user_error(result, "no-such-torchrun not found", "Install PyTorch")
    assert not base.checkpoint_dir("d20-pi").exists()  # checked before anything is cloned


def test_not_enough_devices(base, tmp_path):
    spec = write_spec(tmp_path, f"launch: {{nproc_per_node: 4, gpus_per_variant: 4, torchrun: "
                                f"{fake_torchrun(tmp_path)}}}\n")
    result = rlab("continue", "--spec", str(spec), "--base-dir", str(base.root), "--from-step", "10",
                  "--variants", "pi", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert_user_error(result, "Not enough devices: launch.gpus_per_variant=4 but only 2 GPU(s) are visible")
    assert not base.checkpoint_dir("d20-pi").exists()


def test_pipeline_failure_isolation_and_tag_exists(base, tmp_path):
    results = tmp_path / "res"
    spec = write_spec(tmp_path, f"name: iso\nlaunch: {{torchrun: {fake_torchrun(tmp_path, fail_on='d20-ntk')}}}\n")
    common = ["--spec", str(spec), "--base-dir", str(base.root), "--results-dir", str(results), "--from-step", "20"]
    result = rlab("continue", *common, "--variants", "pi,ntk,yarn")
    layout = ExperimentLayout(results, "iso")
    # ntk failed, yet pi (before it) and yarn (after it) ran
    assert_user_error(result, "1 of 3 job(s) failed: d20-ntk", f"Rerun just these with: rlab continue --spec "
                      f"{layout.resolved_spec} --variants ntk --resume")
    assert "worker crashed: CUDA error" in result.stderr  # the failing job's last log lines
    for tag in ("d20-pi", "d20-ntk", "d20-yarn"):
        assert checkpoint_steps(base.checkpoint_dir(tag)) == [20]
        log = layout.train_log(tag).read_text()
        assert "launched --nnodes=1 --nproc-per-node=1" in log and str(layout.run_config(tag)) in log
        run = json.loads(layout.run_config(tag).read_text())
        assert run["lineage"] == {"parent_tag": "d20", "parent_step": 20} and run["resume"] is False
    saved = yaml.safe_load(layout.resolved_spec.read_text())
    assert list(saved["variants"]) == ["pi", "ntk", "yarn"] and saved["base"]["step"] == 20
    assert saved["base"]["base_dir"] == str(base.root)
    # the tag now exists: refused without --resume/--force
    assert_user_error(rlab("continue", *common, "--variants", "ntk"), "Tag 'd20-ntk' already exists",
                      "--resume", "--force")
    # the printed rerun command works as printed (the stand-in fails on ntk again, but as a resumed run)
    rerun = rlab("continue", "--spec", str(layout.resolved_spec), "--variants", "ntk", "--resume")
    assert rerun.returncode == 1 and "d20-ntk: resuming" in rerun.stdout
    assert json.loads(layout.run_config("d20-ntk").read_text())["resume"] is True
    # --force says what it deletes, then re-clones
    (base.checkpoint_dir("d20-pi") / "model_000021.pt").write_bytes(b"x")
    (base.checkpoint_dir("d20-pi") / "meta_000021.json").write_text("{}")
    forced = rlab("continue", *common, "--variants", "pi", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "--force: deleting d20-pi" in forced.stderr and str(base.checkpoint_dir("d20-pi")) in forced.stderr
    assert checkpoint_steps(base.checkpoint_dir("d20-pi")) == [20]


def test_seeds_and_training_free_arm(base, tmp_path):
    """--seeds 2 --zero-shot: two trained tags per variant and a zero-shot clone that launches nothing."""
    results = tmp_path / "res"
    spec = write_spec(tmp_path, f"name: arms\nlaunch: {{torchrun: {fake_torchrun(tmp_path)}}}\n")
    result = rlab("continue", "--spec", str(spec), "--base-dir", str(base.root), "--results-dir", str(results),
                  "--from-step", "20", "--variants", "yarn", "--seeds", "2", "--zero-shot")
    assert result.returncode == 0, result.stdout + result.stderr
    layout = ExperimentLayout(results, "arms")
    assert "d20-yarn-zeroshot: training-free arm" in result.stdout
    for tag, seed, steps in (("d20-yarn", 42, 100), ("d20-yarn-seed1", 43, 100), ("d20-yarn-zeroshot", 42, 0)):
        run = json.loads(layout.run_config(tag).read_text())
        assert (run["train"]["seed"], run["train"]["steps"]) == (seed, steps)
        meta = json.loads(meta_file(base.checkpoint_dir(tag), 20).read_text())
        assert meta["rope"]["variant"] == "yarn" and meta["lineage"] == {"parent_tag": "d20", "parent_step": 20}
    assert layout.train_log("d20-yarn-seed1").is_file() and not layout.train_log("d20-yarn-zeroshot").exists()


def test_slurm_dry_run_writes_scripts_only(base, tmp_path):
    results = tmp_path / "res"
    result = rlab("continue", "--spec", str(EXPERIMENTS / "rope_scaling_d20.yaml"), "--launcher", "slurm",
                  "--dry-run", "--results-dir", str(results), "--variants", "yarn")
    assert result.returncode == 0, result.stderr
    script = ExperimentLayout(results, "rope_scaling_d20").sbatch_script("d20-yarn")
    text = script.read_text()
    assert "#SBATCH --gpus-per-node=8" in text and "--nproc-per-node=8" in text and "srun" in text
    assert sorted(p.name for p in script.parent.iterdir()) == ["sbatch.sh"]  # nothing else written


# --- slow: the real worker under torchrun, and a real SLURM cluster ------------------------------------


def pretrained_smoke_base(tiny_base_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the tiny base dir with the smoke base model trained into tag `smoke` (4 steps)."""
    base = tmp_path / "base"
    shutil.copytree(tiny_base_dir, base)
    results = tmp_path / "results"
    result = rlab("pretrain", "--spec", str(EXPERIMENTS / "smoke.yaml"), "--base-dir", str(base), "--results-dir",
                  str(results), "--nproc", "1", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert checkpoint_steps(BaseLayout(base).checkpoint_dir("smoke")) == [4]
    return base, results


@pytest.mark.slow
def test_end_to_end_pretrain_continue_eval(tiny_base_dir, tmp_path):
    base_dir, results = pretrained_smoke_base(tiny_base_dir, tmp_path)
    base = BaseLayout(base_dir)
    common = ["--spec", str(EXPERIMENTS / "smoke.yaml"), "--base-dir", str(base_dir), "--results-dir", str(results)]
    # A broken yarn tag resumed with --resume fails; pi (a fresh clone) must still train.
    broken = base.checkpoint_dir("smoke-yarn")
    broken.mkdir()
    model_file(broken, 4).write_bytes(b"not a checkpoint")
    meta_file(broken, 4).write_text(meta_file(base.checkpoint_dir("smoke"), 4).read_text())
    result = rlab("continue", *common, "--variants", "pi,yarn", "--resume", timeout=300)
    assert_user_error(result, "1 of 2 job(s) failed: smoke-yarn", "--variants yarn --resume")
    assert checkpoint_steps(base.checkpoint_dir("smoke-pi")) == [4, 6]
    layout = ExperimentLayout(results, "smoke")
    records = [json.loads(line) for line in layout.metrics_file("smoke-pi").read_text().splitlines()]
    assert records[-1]["type"] == "done" and any(r["type"] == "train" for r in records)
    assert "--nproc-per-node=2" in layout.train_log("smoke-pi").read_text()
    # Replace the broken tag; both variants then have trained checkpoints.
    fixed = rlab("continue", *common, "--variants", "yarn", "--force", timeout=300)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    meta = json.loads(meta_file(base.checkpoint_dir("smoke-yarn"), 6).read_text())
    assert meta["lineage"] == {"parent_tag": "smoke", "parent_step": 4} and meta["rope"]["variant"] == "yarn"
    # Evaluate one tag without --spec: the experiment and settings come from the checkpoint and saved spec.
    evaluated = rlab("eval", "--tag", "smoke-pi", "--base-dir", str(base_dir), "--results-dir", str(results),
                     timeout=300)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    report = json.loads(layout.eval_json("smoke-pi").read_text())
    assert (report["tag"], report["variant"], report["step"]) == ("smoke-pi", "pi", 6)
    assert set(report["metrics"]) >= {"bpb", "bpb_length"}
    assert layout.eval_run_config("smoke-pi").exists() and layout.eval_log("smoke-pi").exists()
    listing = rlab("ls", "--base-dir", str(base_dir), "--results-dir", str(results))
    assert "smoke-pi" in listing.stdout and "smoke@4" in listing.stdout and "bpb_length" in listing.stdout


def test_ctrl_c_stops_every_job_and_says_how_to_resume(base, tmp_path):
    import signal
    import time

    script = tmp_path / "slow-torchrun"
    script.write_text(f'#!/bin/sh\nsleep 120 &\necho $$ $! > {tmp_path}/pids-$(basename $(dirname "$@" | tail -c 30))'
                      '\nwait\n')
    script.chmod(0o755)
    spec = write_spec(tmp_path, f"name: cc\nlaunch: {{torchrun: {script}}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "rlab", "continue", "--spec", str(spec), "--base-dir",
                             str(base.root), "--results-dir", str(tmp_path / "res"), "--from-step", "10",
                             "--variants", "pi,yarn"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"}, cwd=REPO)
    deadline = time.time() + 60
    while not list(tmp_path.glob("pids-*")) and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    pids = [int(p) for f in tmp_path.glob("pids-*") for p in f.read_text().split()]
    assert len(pids) == 2  # the first job (launcher + its child) runs; the second waits its turn
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in stderr
    text = " ".join(stderr.split())
    assert "Interrupted: stopped every job" in text and "Unfinished: pi, yarn" in text
    assert f"Resume with: rlab continue --spec {tmp_path / 'res' / 'cc' / 'spec.resolved.yaml'} --variants pi,yarn " \
           "--resume" in text
    time.sleep(0.2)
    alive = [p for p in pids if Path(f"/proc/{p}").exists()
             and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")]
    assert alive == []


def test_nproc_defaults_to_every_visible_gpu():
    result = rlab("continue", "--from-step", "21400", "--variants", "pi", "--dry-run",
                  env={"CUDA_VISIBLE_DEVICES": "0,1,2"})
    assert result.returncode == 0, result.stderr
    assert "--nproc-per-node=3 " in result.stdout
    cpu = rlab("continue", "--from-step", "21400", "--variants", "pi", "--dry-run", env={"CUDA_VISIBLE_DEVICES": ""})
    assert "--nproc-per-node=1 " in cpu.stdout


def test_multi_node_flags_pass_through():
    result = rlab("continue", "--from-step", "21400", "--nproc", "8", "--variants", "pi,yarn", "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "node0:29400", "--max-restarts", "2",
                  "--dry-run")
    assert result.returncode == 0, result.stderr
    commands = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("torchrun")]
    assert commands[1].startswith("torchrun --nnodes=2 --nproc-per-node=8 --node-rank=1 --rdzv-backend=c10d "
                                  "--rdzv-endpoint=node0:29401 --rdzv-id=d20-yarn --max-restarts=2 -m rlab.core.train")
    assert "2x8" in result.stdout  # world = nodes x procs in the plan table
    # the d20 spec's batch (524288 tokens = 8 x 8192 x 8 GPUs) does not divide over 16 GPUs: said up front
    doubled = rlab("continue", "--spec", str(EXPERIMENTS / "rope_scaling_d20.yaml"), "--nnodes", "2",
                   "--rdzv-endpoint", "node0", "--dry-run")
    assert_user_error(doubled, "8 x 8192 x 16 = 1048576")
