"""`rlab continue` through the real entry point: errors, dry run, the clone->launch->summary pipeline.

Fast tests launch a stand-in "torchrun" (a real shell script set as launch.torchrun) so the whole
CLI path runs in a second; the slow test runs the real training worker under torchrun.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from rlab.orchestrate.lock import lock_holder
from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps, meta_file, model_file
from tests.cli.harness import (
    alive,
    assert_user_error,
    processes_mentioning,
    run_main,
    run_process,
    start_process,
)
from tests.conftest import default_sigint
from tests.orchestrate.helpers import (
    EXPERIMENTS,
    continue_from,
    d20_base,
    fake_torchrun,
    launcher_spec,
    make_checkpoint,
    pretrained_smoke_base,
    snapshot,
    spec_args,
    write_spec,
)


@pytest.fixture
def base(tmp_path) -> BaseLayout:
    make_checkpoint(tmp_path / "base", "d20", steps=(10, 20))
    return BaseLayout(tmp_path / "base")


def test_dry_run_prints_the_8_gpu_commands_and_touches_nothing(tmp_path):
    base = d20_base(tmp_path / "base")
    before = snapshot(BaseLayout(base).checkpoint_dir("d20"))
    result = run_main(
        "continue", "--spec", str(EXPERIMENTS / "rope_scaling_d20.yaml"), "--dry-run", "--base-dir", str(base)
    )
    assert result.code == 0, result.err
    commands = [line.strip() for line in result.out.splitlines() if line.strip().startswith("torchrun")]
    assert len(commands) == 4
    results = Path(os.environ["RLAB_RESULTS_DIR"])
    assert commands[0] == (
        "torchrun --standalone --nnodes=1 --nproc-per-node=8 --max-restarts=0 -m rlab.core.train "
        f"{results}/d20/runs/d20-rope/run.json"
    )
    assert [c.split("/runs/")[1].split("/")[0] for c in commands] == [
        "d20-rope",
        "d20-pi",
        "d20-ntk",
        "d20-yarn",
    ]
    assert "L0=2048; target_len 8192; train data after d20@21400 (pq 3, rg 17)" in " ".join(
        result.out.split()
    )
    assert "No data directory at" in result.err  # a warning for a dry run, not an error
    # the power line: what the planned evals can detect vs eval.target_mde, noise from the defaults (no pilot)
    said = " ".join(result.out.split())
    assert "power: MDE at 80% power, family alpha/m, 1 seed, noise from default noise (no pilot)" in said
    assert "primary " in said and "at 128 documents" in said  # 65536 targets in blocks of 512
    assert "underpowered for eval.target_mde.bpb = 0.01" in " ".join(
        result.err.split()
    )  # the noisiest length
    assert not results.exists() and snapshot(BaseLayout(base).checkpoint_dir("d20")) == before
    assert sorted(p.name for p in BaseLayout(base).checkpoints_root.iterdir()) == ["d20"]


def test_the_seeds_command_plans_4x_the_checkpoint_length_as_json(tmp_path):
    """d20 trained at 2048 -> seq_len 8192, factor 4 per tag; no d20 -> non-zero, the JSON saying why."""
    base = d20_base(tmp_path / "base")
    args = ["continue", "--from-step", "21400", "--variants", "pi,ntk,yarn", "--dry-run", "--json"]
    result = run_main(*args, "--base-dir", str(base))
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert plan["ok"] and plan["problems"] == [] and plan["base"]["L0"] == 2048 and plan["target_len"] == 8192
    # the control arm, plain rope trained identically, comes first: every verdict is vs it
    assert [t["tag"] for t in plan["tags"]] == ["d20-rope", "d20-pi", "d20-ntk", "d20-yarn"]
    assert [t["control"] for t in plan["tags"]] == [True, False, False, False]
    primary = next(e for e in plan["power"]["endpoints"] if e["endpoint"] == "primary")
    assert primary["family_size"] == 3 and primary["n_units"] > 0 and primary["source"].startswith("default")
    for tag in plan["tags"]:
        extended = not tag["control"]
        assert (tag["L0"], tag["seq_len"]) == (2048, 8192) and (tag["factor"] == 4.0) == extended
        assert tag["rope"]["original_len"] == 2048 and (tag["rope"]["factor"] == 4.0) == extended
        assert tag["data_start"]["describe"] == "after d20@21400 (pq 3, rg 17)"
        assert tag["command"].startswith("torchrun --standalone") and tag["nproc"] >= 1
        assert tag["tokens"] == tag["steps"] * 8 * 8192 * tag["nproc"]
    # --target-len overrides; a training length at L0 warns with both numbers
    short = json.loads(
        run_main(*args, "--base-dir", str(base), "--target-len", "4096", "--seq-len", "2048").out
    )
    assert {t["factor"] for t in short["tags"] if not t["control"]} == {2.0}
    assert {t["seq_len"] for t in short["tags"]} == {2048}
    assert any("train.seq_len 2048 is not above the base's context L0=2048" in w for w in short["warnings"])
    # no d20 checkpoint: non-zero, the JSON says what is missing, and so does stderr
    missing = run_main(*args, "--base-dir", str(tmp_path / "empty"))
    assert missing.code == 1 and "Traceback" not in missing.err
    plan = json.loads(missing.out)
    assert not plan["ok"] and any("Base tag 'd20' not found" in p for p in plan["problems"])
    assert "Base tag 'd20' not found" in missing.err


def test_dry_run_lists_every_problem_at_once_and_validate_agrees(base, tmp_path):
    (base.checkpoint_dir("d20-pi")).mkdir()
    spec = write_spec(
        tmp_path,
        "train: {seq_len: 1024, device_batch_size: 4, total_batch_size: 10000}\n"
        "launch: {nproc_per_node: 2}\nbase: {step: 20}\nvariants: {pi: {variant: pi}}\n",
    )
    for command in (["continue", "--spec", str(spec), "--dry-run"], ["validate", str(spec)]):
        result = run_main(*command, "--base-dir", str(base.root))
        assert_user_error(
            result, "2 problems stop this run", "4 x 1024 x 2 = 8192", "Tag 'd20-pi' already exists"
        )
    bad = run_main("continue", "--spec", str(spec), "--dry-run", "--rdzv-endpoint", "127.0.0.1:abc")
    assert_user_error(bad, "launch.rdzv_endpoint: port must be a number from 1 to 65535 (got 'abc'")
    assert_user_error(
        run_main("validate", str(spec), "--base-dir", str(tmp_path / "nothing")), "Base tag 'd20' not found"
    )
    assert run_main("validate", str(spec), "--spec-only").code == 0


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["--from-step", "15", "--variants", "pi"],
            ["No checkpoint for step 15 in", "(found: 10, 20).", "Choose one with --from-step."],
        ),
        (
            ["--from-step", "10", "--variants", "pi", "--base-tag", "d21"],
            ["Unknown base tag 'd21'. Did you mean 'd20'?", "--base-tag"],
        ),
        (["--from-step", "10", "--variants", "pi,yarm"], ["Unknown variant 'yarm'. Did you mean 'yarn'?"]),
        (["--variants", "pi"], ["No base step to continue from.", "--from-step"]),
    ],
)
def test_user_errors(base, args, fragments):
    before = snapshot(base.checkpoint_dir("d20"))
    assert_user_error(run_main("continue", "--base-dir", str(base.root), *args), *fragments)
    assert snapshot(base.checkpoint_dir("d20")) == before


def test_debug_env_shows_the_traceback(base):
    result = run_process(
        "continue",
        "--base-dir",
        str(base.root),
        *continue_from(15, "pi"),
        env={"RLAB_DEBUG": "1"},
    )
    assert result.code != 0 and "Traceback" in result.err and "CheckpointError" in result.err


def test_spec_errors_all_at_once(tmp_path):
    spec = write_spec(
        tmp_path,
        "base: {step: -1, tagg: x}\ntrain: {steps: -1}\nvariants:\n  pi: {variant: pi, factor: 0.5}\n",
    )
    result = run_main("continue", "--spec", str(spec), "--variants", "pi")
    assert_user_error(
        result,
        "4 problem(s)",
        "base.step:",
        "base.tagg: unknown key",
        "train.steps:",
        "variants.pi.factor: must be >= 1 for variant 'pi' (got 0.5)",
    )


def test_batch_arithmetic_error(base, tmp_path):
    spec = write_spec(
        tmp_path,
        "train: {seq_len: 1024, device_batch_size: 4, total_batch_size: 10000}\n"
        "launch: {nproc_per_node: 2}\n",
    )
    result = run_main("continue", "--spec", str(spec), "--base-dir", str(base.root), *continue_from(10, "pi"))
    assert_user_error(
        result, "train.total_batch_size: 10000 tokens is not a multiple of", "4 x 1024 x 2 = 8192"
    )


def test_torchrun_missing(base, tmp_path):
    spec = write_spec(tmp_path, "launch: {torchrun: no-such-torchrun}\n")
    result = run_main("continue", "--spec", str(spec), "--base-dir", str(base.root), *continue_from(10, "pi"))
    assert_user_error(result, "no-such-torchrun not found", "Install PyTorch")
    assert not base.checkpoint_dir("d20-pi").exists()  # checked before anything is cloned


def test_not_enough_devices(base, tmp_path):
    spec = write_spec(
        tmp_path, f"launch: {{nproc_per_node: 4, gpus_per_variant: 4, torchrun: {fake_torchrun(tmp_path)}}}\n"
    )
    args = ["--spec", str(spec), "--base-dir", str(base.root), *continue_from(10, "pi")]
    result = run_main("continue", *args, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert_user_error(result, "Not enough devices: launch.gpus_per_variant=4 but only 2 GPU(s) are visible")
    assert not base.checkpoint_dir("d20-pi").exists()


def test_pipeline_failure_isolation_and_tag_exists(base, tmp_path):
    results = tmp_path / "res"
    spec = write_spec(
        tmp_path, f"name: iso\nlaunch: {{torchrun: {fake_torchrun(tmp_path, fail_on='d20-iso-ntk')}}}\n"
    )
    common = [
        *spec_args(spec, base.root, results),
        "--from-step",
        "20",
    ]
    result = run_main("continue", *common, "--variants", "pi,ntk,yarn")
    layout = ExperimentLayout(results, "iso")
    # ntk failed, yet pi (before it) and yarn (after it) ran
    assert_user_error(
        result,
        "1 of 4 job(s) failed: d20-iso-ntk",
        "d20-iso-ntk: Refusing to save step 3: non-finite",
        f"Rerun just these with: rlab continue --spec {layout.tag_spec('d20-iso-ntk')} --variants ntk "
        f"--resume --results-dir {results}",
    )  # $RLAB_RESULTS_DIR (set by conftest) would win
    assert "worker crashed: CUDA error" in result.err  # the failing job's last log lines
    # the worker's own error line comes first, before the log tail
    assert result.err.index("Refusing to save") < result.err.index("worker crashed")
    for tag in ("d20-iso-rope", "d20-iso-pi", "d20-iso-ntk", "d20-iso-yarn"):  # the control arm first
        assert checkpoint_steps(base.checkpoint_dir(tag)) == [20]
        log = layout.train_log(tag).read_text()
        assert (
            "launched --standalone --nnodes=1 --nproc-per-node=1" in log
            and str(layout.run_config(tag)) in log
        )
        run = json.loads(layout.run_config(tag).read_text())
        assert run["lineage"] == {"parent_tag": "d20", "parent_step": 20} and run["resume"] is False
    saved = yaml.safe_load(layout.resolved_spec.read_text())
    assert list(saved["variants"]) == ["rope", "pi", "ntk", "yarn"] and saved["base"]["step"] == 20
    assert saved["base"]["base_dir"] == str(base.root)
    # the tag now exists: refused without --resume/--force
    assert_user_error(
        run_main("continue", *common, "--variants", "ntk"),
        "Tag 'd20-iso-ntk' already exists",
        "--resume",
        "--force",
    )
    # an unrelated run of pi with other settings overwrites the experiment's spec, not ntk's own
    other = run_main("continue", *common, "--variants", "pi", "--resume", "--steps", "5")
    assert other.code == 0, other.err
    assert yaml.safe_load(layout.resolved_spec.read_text())["train"]["steps"] == 5
    assert yaml.safe_load(layout.tag_spec("d20-iso-ntk").read_text())["train"]["steps"] == 100
    # the printed rerun command works as printed (the stand-in fails on ntk again, but as a resumed run)
    rerun = run_main(
        "continue",
        "--spec",
        str(layout.tag_spec("d20-iso-ntk")),
        "--variants",
        "ntk",
        "--resume",
        "--results-dir",
        str(results),
    )
    assert rerun.code == 1 and "d20-iso-ntk: resuming" in rerun.out
    assert json.loads(layout.run_config("d20-iso-ntk").read_text())["resume"] is True
    # --force says what it deletes, then re-clones
    (base.checkpoint_dir("d20-iso-pi") / "model_000021.pt").write_bytes(b"x")
    (base.checkpoint_dir("d20-iso-pi") / "meta_000021.json").write_text("{}")
    forced = run_main("continue", *common, "--variants", "pi", "--force")
    assert forced.code == 0, forced.err
    assert (
        "--force: deleting d20-iso-pi" in forced.err and str(base.checkpoint_dir("d20-iso-pi")) in forced.err
    )
    assert checkpoint_steps(base.checkpoint_dir("d20-iso-pi")) == [20]


def test_seeds_and_training_free_arm(base, tmp_path):
    """--seeds 2 --zero-shot: two trained tags per variant and a zero-shot clone that launches nothing."""
    results = tmp_path / "res"
    spec = write_spec(tmp_path, f"name: arms\nlaunch: {{torchrun: {fake_torchrun(tmp_path)}}}\n")
    result = run_main(
        "continue",
        *spec_args(spec, base.root, results),
        *continue_from(20, "yarn"),
        "--seeds",
        "2",
        "--zero-shot",
    )
    assert result.code == 0, result.out + result.err
    layout = ExperimentLayout(results, "arms")
    assert "d20-arms-yarn-zeroshot: training-free arm" in result.out
    for tag, seed, steps in (
        ("d20-arms-yarn", 42, 100),
        ("d20-arms-yarn-seed1", 43, 100),
        ("d20-arms-yarn-zeroshot", 42, 0),
    ):
        run = json.loads(layout.run_config(tag).read_text())
        assert (run["train"]["seed"], run["train"]["steps"]) == (seed, steps)
        assert run["train"]["data_draw"] == (1 if tag.endswith("seed1") else 0)  # replicates read other data
        meta = json.loads(meta_file(base.checkpoint_dir(tag), 20).read_text())
        assert meta["rope"]["variant"] == "yarn" and meta["lineage"] == {
            "parent_tag": "d20",
            "parent_step": 20,
        }
        l0 = json.loads(meta_file(base.checkpoint_dir("d20"), 20).read_text())["model_config"]["sequence_len"]
        assert meta["rope"]["original_len"] == l0
        # the training-free arm is the variant at the target length; trained ones get it when training starts
        assert meta["model_config"]["sequence_len"] == (run["train"]["seq_len"] if steps == 0 else l0) != 0
    assert run["train"]["seq_len"] > l0
    assert (
        layout.train_log("d20-arms-yarn-seed1").is_file()
        and not layout.train_log("d20-arms-yarn-zeroshot").exists()
    )
    # eval --all with the same spec file finds the tags the flags made (from the saved resolved spec)
    planned = run_main(
        "eval",
        *spec_args(spec, base.root, results),
        "--all",
        "--dry-run",
    )
    assert planned.code == 0, planned.err
    tags = [line.split(" ", 1)[0] for line in planned.out.splitlines() if line.startswith("d20")]
    assert tags == [  # the control arm (rope) trained and made training-free like the variant
        "d20",
        *("d20-arms-rope", "d20-arms-rope-seed1", "d20-arms-rope-zeroshot"),
        *("d20-arms-yarn", "d20-arms-yarn-seed1", "d20-arms-yarn-zeroshot"),
    ]


def test_slurm_dry_run_writes_scripts_only(base, tmp_path):
    results = tmp_path / "res"
    result = run_main(
        "continue",
        "--spec",
        str(EXPERIMENTS / "rope_scaling_d20.yaml"),
        "--launcher",
        "slurm",
        "--dry-run",
        "--results-dir",
        str(results),
        "--variants",
        "yarn",
        "--base-dir",
        str(d20_base(tmp_path / "d20base")),
    )
    assert result.code == 0, result.err
    script = ExperimentLayout(results, "d20").sbatch_script("d20-yarn")
    text = script.read_text()
    assert "#SBATCH --gpus-per-node=8" in text and "--nproc-per-node=8" in text and "srun" in text
    assert sorted(p.name for p in script.parent.iterdir()) == ["sbatch.sh"]  # nothing else written


# --- slow: the real worker under torchrun, and a real SLURM cluster ------------------------------------


@pytest.mark.slow
def test_end_to_end_pretrain_continue_eval(tiny_base_dir, tmp_path):
    base_dir, results = pretrained_smoke_base(tiny_base_dir, tmp_path)
    base = BaseLayout(base_dir)
    common = [
        *spec_args(EXPERIMENTS / "smoke.yaml", base_dir, results),
    ]
    # A broken yarn tag resumed with --resume is refused before anything is cloned or launched, naming the
    # file; pi (a fresh clone) trains on its own.
    broken = base.checkpoint_dir("smoke-yarn")
    broken.mkdir()
    model_file(broken, 4).write_bytes(b"not a checkpoint")
    meta_file(broken, 4).write_text(meta_file(base.checkpoint_dir("smoke"), 4).read_text())
    result = run_process("continue", *common, "--variants", "pi,yarn", "--resume", timeout=300)
    assert_user_error(
        result, f"{model_file(broken, 4)}: cannot read the model file", "re-clone it with --force"
    )
    assert not base.checkpoint_dir("smoke-pi").exists()
    result = run_process("continue", *common, "--variants", "pi", timeout=300)
    assert result.code == 0, result.out + result.err
    assert checkpoint_steps(base.checkpoint_dir("smoke-pi")) == [4, 6]
    layout = ExperimentLayout(results, "smoke")
    records = [json.loads(line) for line in layout.metrics_file("smoke-pi").read_text().splitlines()]
    assert records[-1]["type"] == "done" and any(r["type"] == "train" for r in records)
    assert "--nproc-per-node=2" in layout.train_log("smoke-pi").read_text()
    # Replace the broken tag; both variants then have trained checkpoints.
    fixed = run_process("continue", *common, "--variants", "yarn", "--force", timeout=300)
    assert fixed.code == 0, fixed.out + fixed.err
    meta = json.loads(meta_file(base.checkpoint_dir("smoke-yarn"), 6).read_text())
    assert meta["lineage"] == {"parent_tag": "smoke", "parent_step": 4} and meta["rope"]["variant"] == "yarn"
    # Evaluate one tag without --spec: the experiment and settings come from the checkpoint and saved spec.
    evaluated = run_process(
        "eval", "--tag", "smoke-pi", "--base-dir", str(base_dir), "--results-dir", str(results), timeout=300
    )
    assert evaluated.code == 0, evaluated.out + evaluated.err
    report = json.loads(layout.eval_json("smoke-pi").read_text())
    assert (report["tag"], report["variant"], report["checkpoint"]["step"]) == ("smoke-pi", "pi", 6)
    assert set(report["metrics"]) >= {"bpb", "bpb_length", "passkey", "ruler"}
    assert layout.eval_run_config("smoke-pi").exists() and layout.eval_log("smoke-pi").exists()
    listing = run_process("ls", "--base-dir", str(base_dir), "--results-dir", str(results))
    assert listing.code == 0 and "smoke-pi" in listing.out
    listed = json.loads(
        run_process("ls", "--json", "--base-dir", str(base_dir), "--results-dir", str(results)).out
    )
    tags = {t["tag"]: t for t in listed["tags"]}
    assert {"smoke", "smoke-pi", "smoke-yarn"} <= set(tags) and "evaluated" in json.dumps(tags["smoke-pi"])


@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_stops_every_job_and_says_how_to_resume(base, tmp_path, signum, code):
    """Ctrl-C exits 130 and SIGTERM 143 (the shell's 128 + signal), after every job was stopped."""

    spec = launcher_spec(
        tmp_path,
        "cc",
        f'sleep 120 &\necho $$ $! > {tmp_path}/pids-$(basename $(dirname "$@" | tail -c 30))\nwait\n',
    )
    proc = start_process(
        "continue",
        *spec_args(spec, base.root, tmp_path / "res"),
        *continue_from(10, "pi,yarn"),
        "--no-control",  # two jobs are enough to show that every one stops
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    deadline = time.time() + 300  # a hang guard, not a timing: under load rlab takes >100 s to launch
    while not list(tmp_path.glob("pids-*")) and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    pids = [int(p) for f in tmp_path.glob("pids-*") for p in f.read_text().split()]
    assert len(pids) == 2  # the first job (launcher + its child) runs; the second waits its turn
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == code and "Traceback" not in stderr
    text = " ".join(stderr.split())
    assert "Interrupted: stopped every job" in text and "Unfinished: pi, yarn" in text
    assert (
        f"Resume with: rlab continue --spec {tmp_path / 'res' / 'cc' / 'spec.resolved.yaml'} --variants pi,yarn "
        "--resume" in text
    )
    time.sleep(0.2)
    assert [p for p in pids if alive(p)] == []


def test_nproc_defaults_to_every_visible_gpu(tmp_path):
    d20_base(tmp_path / "base")  # $RLAB_BASE_DIR
    result = run_main(
        "continue",
        *continue_from(21400, "pi"),
        "--dry-run",
        env={"CUDA_VISIBLE_DEVICES": "0,1,2"},
    )
    assert result.code == 0, result.err
    assert "--nproc-per-node=3 " in result.out
    cpu = run_main("continue", *continue_from(21400, "pi"), "--dry-run", env={"CUDA_VISIBLE_DEVICES": ""})
    assert "--nproc-per-node=1 " in cpu.out


def test_multi_node_flags_pass_through(tmp_path):
    d20_base(tmp_path / "base")  # $RLAB_BASE_DIR
    result = run_main(
        "continue",
        "--from-step",
        "21400",
        "--nproc",
        "8",
        "--variants",
        "pi,yarn",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--rdzv-endpoint",
        "node0:29400",
        "--max-restarts",
        "2",
        "--dry-run",
        "--no-control",
    )
    assert result.code == 0, result.err
    commands = [line.strip() for line in result.out.splitlines() if line.strip().startswith("torchrun")]
    assert commands[1].startswith(
        "torchrun --nnodes=2 --nproc-per-node=8 --node-rank=1 --rdzv-backend=c10d "
        "--rdzv-endpoint=node0:29401 --rdzv-id=d20-yarn --max-restarts=2 -m rlab.core.train"
    )
    assert "2x8" in result.out  # world = nodes x procs in the plan table
    # the d20 spec's batch (524288 tokens = 8 x 8192 x 8 GPUs) does not divide over 16 GPUs: said up front
    doubled = run_main(
        "continue",
        "--spec",
        str(EXPERIMENTS / "rope_scaling_d20.yaml"),
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        "node0",
        "--dry-run",
    )
    assert_user_error(doubled, "8 x 8192 x 16 = 1048576")


def test_sigkill_of_rlab_leaves_no_job_and_a_running_tag_is_locked(base, tmp_path):
    """SIGKILL of rlab's whole process group: the job (own session) dies too; while it ran, its tag was locked."""

    spec = launcher_spec(tmp_path, "kk", f"echo $$ >> {tmp_path}/pids\nexec sleep 300\n")
    common = [
        *spec_args(spec, base.root, tmp_path / "res"),
        *continue_from(10, "pi"),
    ]
    proc = start_process(
        "continue", *common, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.time() + 300  # a hang guard, not a timing
        while not (tmp_path / "pids").exists() and time.time() < deadline:
            time.sleep(0.1)
        job = int((tmp_path / "pids").read_text().split()[0])
        assert alive(job)
        second = run_main("continue", *common, "--resume")
        assert_user_error(second, f"Tag 'd20-kk-pi' is being trained by another rlab (PID {proc.pid}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    deadline = time.time() + 20
    while alive(job) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(job)  # the job got SIGTERM when rlab died (PR_SET_PDEATHSIG), though in its own session

    assert lock_holder(base, "d20-kk-pi") is None


def test_eval_all_finds_the_variants_given_with_flags(base, tmp_path):
    results = tmp_path / "res"
    spec = write_spec(tmp_path, f"name: flagged\nlaunch: {{torchrun: {fake_torchrun(tmp_path)}}}\n")
    common = [*spec_args(spec, base.root, results)]
    trained = run_main("continue", *common, "--from-step", "20", "--variants", "pi,ntk")
    assert trained.code == 0, trained.err
    listed = run_main("eval", "--all", *common, "--dry-run", "--no-core")
    assert listed.code == 0, listed.err
    tags = [line.split(" ", 1)[0] for line in listed.out.splitlines() if line.startswith("d20-")]
    assert tags == ["d20-flagged-rope", "d20-flagged-pi", "d20-flagged-ntk"]  # with the control arm


@pytest.mark.slow
def test_sigkill_of_a_real_continue_leaves_no_torchrun_or_worker(tiny_base_dir, tmp_path):

    base_dir, results = pretrained_smoke_base(tiny_base_dir, tmp_path)
    layout = ExperimentLayout(results, "smoke")
    proc = start_process(
        "continue",
        *spec_args(EXPERIMENTS / "smoke.yaml", base_dir, results),
        "--variants",
        "pi",
        "--no-control",  # else the control arm (rope) trains first and pi never starts
        "--steps",
        "100000",
        "--nproc",
        "2",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 240
        while time.time() < deadline and '"train"' not in (
            layout.metrics_file("smoke-pi").read_text() if layout.metrics_file("smoke-pi").exists() else ""
        ):
            time.sleep(0.5)
        job = processes_mentioning(str(layout.run_config("smoke-pi")))
        assert len(job) >= 3  # torchrun and its two workers, training
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    deadline = time.time() + 90
    while processes_mentioning(str(layout.run_config("smoke-pi"))) and time.time() < deadline:
        time.sleep(0.5)
    assert processes_mentioning(str(layout.run_config("smoke-pi"))) == []


def test_pretrain_goes_through_the_shared_launch_path(tmp_path):
    results = tmp_path / "res"
    spec = write_spec(
        tmp_path,
        f"name: pt\npretrain: {{train: {{steps: 2, seq_len: 64}}}}\n"
        f"launch: {{torchrun: {fake_torchrun(tmp_path)}}}\n",
    )
    result = run_main("pretrain", *spec_args(spec, tmp_path / "b", results))
    assert result.code == 0, result.out + result.err
    layout = ExperimentLayout(results, "pt")
    assert "launched --standalone" in layout.train_log("d20").read_text()
    assert yaml.safe_load(layout.tag_spec("d20").read_text())["pretrain"]["train"]["steps"] == 2


def test_resume_refuses_another_experiments_tag_or_another_base_step(base, tmp_path):
    results = tmp_path / "res"
    spec = write_spec(tmp_path, f"launch: {{torchrun: {fake_torchrun(tmp_path)}}}\n")
    common = [
        *spec_args(spec, base.root, results),
        "--variants",
        "pi",
    ]
    assert run_main("continue", *common, "--from-step", "10").code == 0
    meta = json.loads(meta_file(base.checkpoint_dir("d20-pi"), 10).read_text())
    assert (meta["experiment"], meta["lineage"]) == ("d20", {"parent_tag": "d20", "parent_step": 10})
    # the tag was cloned from step 10: resuming it as a continuation of step 20 is refused, with the fix
    assert_user_error(
        run_main("continue", *common, "--from-step", "20", "--resume"),
        "Tag 'd20-pi' was cloned from d20@10, but this plan starts from d20@20",
        "--base-tag d20 --from-step 10",
        "--force",
    )
    assert run_main("continue", *common, "--from-step", "10", "--resume").code == 0
    # a tag another experiment trained is never resumed here
    meta["run_config"] = {"tag": "d20-pi", "experiment": "other"}
    meta_file(base.checkpoint_dir("d20-pi"), 10).write_text(json.dumps(meta))
    assert_user_error(
        run_main("continue", *common, "--from-step", "10", "--resume"),
        "Tag 'd20-pi' belongs to experiment 'other', not 'd20'",
        "own `name:`",
    )


def test_pretrain_dry_run_shows_the_sequence_length_warmup(tmp_path):
    spec = write_spec(
        tmp_path,
        "name: pt\npretrain: {train: {steps: 6, seq_len: 64, "
        "seq_len_warmup: [{seq_len: 16, steps: 2}, {seq_len: 32, steps: 2}]}}\n",
    )
    result = run_main(
        "pretrain",
        *spec_args(spec, tmp_path / "b", tmp_path / "res"),
        "--dry-run",
    )
    assert result.code == 0, result.out + result.err
    assert "16→32→64" in result.out and not (tmp_path / "res").exists()
