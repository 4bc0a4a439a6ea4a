"""Planning is pure: spec -> run configs, argv, device slots. Table-driven, exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlab.errors import LaunchError, SpecError
from rlab.orchestrate.launch import device_slots, rdzv_endpoint, torchrun_argv
from rlab.orchestrate.plan import (
    check_batch,
    experiment_tags,
    plan_continue,
    plan_eval,
    plan_pretrain,
    variant_of_tag,
)
from rlab.orchestrate.tag_setup import build_jobs
from rlab.spec.experiment import LaunchSpec
from rlab.spec.loading import load_spec
from rlab.spec.run import CheckpointInit, Lineage, ScratchInit
from rlab.spec.train import TrainSpec

BASE = Path("/data/nanochat")
RESULTS = Path("/data/results")


def spec_of(**overrides):
    return load_spec(None, base_dir=BASE, results_dir=RESULTS, **overrides)


@pytest.mark.parametrize(
    ("overrides", "tags", "factors"),
    [
        ({"from_step": 21400, "variants": "pi,ntk,yarn"}, ["d20-pi", "d20-ntk", "d20-yarn"], [4.0, 4.0, 4.0]),
        ({"from_step": 5, "variants": "rope,yarn", "base_tag": "d12"}, ["d12-rope", "d12-yarn"], [1.0, 4.0]),
        (
            {"from_step": 0, "variants": " llama3 , dynamic-ntk,llama3"},
            ["d20-llama3", "d20-dynamic-ntk"],
            [4.0, 4.0],
        ),
    ],
)
def test_plan_continue_tags_and_variants(overrides, tags, factors):
    runs = plan_continue(spec_of(**overrides))
    assert [r.tag for r in runs] == tags
    assert [r.rope.factor for r in runs] == factors
    step = overrides["from_step"]
    base_tag = overrides.get("base_tag", "d20")
    for run in runs:
        assert run.init == CheckpointInit(tag=run.tag, step=step)
        assert run.lineage == Lineage(parent_tag=base_tag, parent_step=step)
        assert run.base_dir == BASE
        assert run.run_dir == RESULTS / base_tag / "runs" / run.tag
        assert run.experiment == base_tag
        assert run.resume is False


def test_plan_is_deterministic_and_flags_win(tmp_path):
    spec_file = tmp_path / "x.yaml"
    spec_file.write_text(
        "name: exp\nbase: {tag: d20, step: 100}\nvariants:\n  yarn: {variant: yarn, factor: 2, "
        "beta_fast: 16}\ntrain: {steps: 50, seq_len: 4096}\n"
    )
    a = plan_continue(load_spec(spec_file, base_dir=BASE, results_dir=RESULTS, steps=7, from_step=200))
    b = plan_continue(load_spec(spec_file, base_dir=BASE, results_dir=RESULTS, steps=7, from_step=200))
    assert a == b
    (run,) = a
    assert (run.tag, run.train.steps, run.train.seq_len, run.init.step) == ("d20-exp-yarn", 7, 4096, 200)
    assert (run.rope.factor, run.rope.beta_fast) == (2.0, 16.0)  # the spec's own variant, not the built-in
    assert run.run_dir == RESULTS / "exp" / "runs" / "d20-exp-yarn"


def test_eval_flags_are_overrides_of_the_spec(tmp_path):
    spec_file = tmp_path / "x.yaml"
    spec_file.write_text("base: {tag: d20}\neval: {evals: [bpb, core, passkey], max_per_task: 5}\n")
    flags = {"core": False, "copy_distance": True, "ruler": None}
    spec = load_spec(spec_file, eval_switches=flags, lengths=[256, 512], tasks=None, eval_bundle=Path("b"))
    assert spec.eval.evals == ("bpb", "passkey", "copy_distance") and spec.eval.lengths == (256, 512)
    assert spec.eval.max_per_task == 5 and spec.eval.core_bundle == Path("b").absolute()
    with pytest.raises(SpecError, match="No evals left to run"):
        load_spec(spec_file, eval_switches={"bpb": False, "core": False, "passkey": False})
    with pytest.raises(SpecError, match=r"eval\.lengths\.0"):  # a bad flag is named by its spec key
        load_spec(spec_file, lengths=[0])


def test_plan_continue_needs_step_and_variants():
    with pytest.raises(SpecError, match="--from-step"):
        plan_continue(spec_of(variants="pi"))
    with pytest.raises(SpecError, match="No variants"):
        plan_continue(spec_of(from_step=3))


def test_unknown_variant_suggests():
    with pytest.raises(SpecError, match="Unknown variant 'yarm'. Did you mean 'yarn'?"):
        spec_of(variants="pi,yarm")


def test_plan_pretrain_and_eval():
    spec = load_spec(
        Path(__file__).parents[2] / "experiments" / "demo.yaml", base_dir=BASE, results_dir=RESULTS
    )
    run = plan_pretrain(spec)
    assert run.tag == "demo" and run.variant == "rope" and isinstance(run.init, ScratchInit)
    assert run.init.model == spec.pretrain.model and run.train.seq_len == 256
    ev = plan_eval(spec, "demo-yarn")
    assert (ev.tag, ev.variant, ev.step, ev.base_dir) == ("demo-yarn", "yarn", None, BASE)
    assert ev.out_dir == RESULTS / "demo" / "evals" / "demo-yarn"
    assert ev.core_csv == RESULTS / "demo" / "results_yarn.csv"
    assert plan_eval(spec, "demo").variant == "base"
    assert plan_eval(spec, "other", variant="pi").variant == "pi"
    with pytest.raises(SpecError, match="pretrain"):
        plan_pretrain(spec_of())


@pytest.mark.parametrize(
    ("train", "world", "expected"),
    [
        (TrainSpec(seq_len=8192, device_batch_size=8, total_batch_size=524288), 8, 1),
        (TrainSpec(seq_len=2048, device_batch_size=8, total_batch_size=524288), 8, 4),
        (TrainSpec(seq_len=1024, device_batch_size=2), 2, 1),
    ],
)
def test_check_batch(train, world, expected):
    assert check_batch(train, world) == expected


def test_check_batch_error_names_the_arithmetic():
    with pytest.raises(SpecError) as info:
        check_batch(TrainSpec(seq_len=8192, device_batch_size=8, total_batch_size=500000), 8)
    assert "train.total_batch_size: 500000 tokens is not a multiple of" in info.value.message
    assert "8 x 8192 x 8 = 524288" in info.value.message


P = Path("/r/run.json")


@pytest.mark.parametrize(
    ("launch", "index", "argv"),
    [
        (
            LaunchSpec(nproc_per_node=8),
            0,
            [
                "torchrun",
                "--standalone",
                "--nnodes=1",
                "--nproc-per-node=8",
                "--max-restarts=0",
                "-m",
                "rlab.core.train",
                "/r/run.json",
            ],
        ),
        (
            LaunchSpec(nproc_per_node=2, max_restarts=3, rdzv_port=30000),
            2,
            [
                "torchrun",
                "--standalone",
                "--nnodes=1",
                "--nproc-per-node=2",
                "--max-restarts=3",
                "-m",
                "rlab.core.train",
                "/r/run.json",
            ],
        ),
        (
            LaunchSpec(nproc_per_node=2, rdzv_endpoint="127.0.0.1:29700"),
            1,  # an explicit single-node endpoint
            [
                "torchrun",
                "--nnodes=1",
                "--nproc-per-node=2",
                "--rdzv-backend=c10d",
                "--rdzv-endpoint=127.0.0.1:29701",
                "--rdzv-id=t",
                "--max-restarts=0",
                "-m",
                "rlab.core.train",
                "/r/run.json",
            ],
        ),
        (
            LaunchSpec(nproc_per_node=8, nnodes=4, node_rank=1, rdzv_endpoint="node0:29400"),
            1,
            [
                "torchrun",
                "--nnodes=4",
                "--nproc-per-node=8",
                "--node-rank=1",
                "--rdzv-backend=c10d",
                "--rdzv-endpoint=node0:29401",
                "--rdzv-id=t",
                "--max-restarts=0",
                "-m",
                "rlab.core.train",
                "/r/run.json",
            ],
        ),
        (
            LaunchSpec(nproc_per_node=8, gpus_per_variant=2, torchrun="/opt/bin/torchrun"),
            0,
            [
                "/opt/bin/torchrun",
                "--standalone",
                "--nnodes=1",
                "--nproc-per-node=2",
                "--max-restarts=0",
                "-m",
                "rlab.core.train",
                "/r/run.json",
            ],
        ),
    ],
)
def test_torchrun_argv(launch, index, argv):
    assert torchrun_argv(P, launch, index=index, rdzv_id="t") == argv


def test_rdzv_endpoint_host_without_port():
    assert rdzv_endpoint(LaunchSpec(nnodes=2, rdzv_endpoint="head", rdzv_port=29600), 3) == "head:29603"


@pytest.mark.parametrize(
    ("launch", "gpus", "slots"),
    [
        (LaunchSpec(nproc_per_node=8), [str(i) for i in range(8)], [None]),
        (LaunchSpec(nproc_per_node=2), [], [None]),  # CPU: gloo processes, one job at a time
        (
            LaunchSpec(nproc_per_node=8, gpus_per_variant=2),
            [str(i) for i in range(8)],
            [("0", "1"), ("2", "3"), ("4", "5"), ("6", "7")],
        ),
        (LaunchSpec(nproc_per_node=4, gpus_per_variant=3), ["4", "5", "6", "7"], [("4", "5", "6")]),
    ],
)
def test_device_slots(launch, gpus, slots):
    assert device_slots(launch, gpus) == slots


@pytest.mark.parametrize(
    ("launch", "gpus", "match"),
    [
        (LaunchSpec(nproc_per_node=8), ["0", "1"], "nproc_per_node=8 but 2 GPU"),
        (LaunchSpec(nproc_per_node=4, gpus_per_variant=4), ["0", "1"], "gpus_per_variant=4 but only 2"),
        (LaunchSpec(nproc_per_node=2, gpus_per_variant=1), [], "none are visible"),
    ],
)
def test_device_slots_not_enough_devices(launch, gpus, match):
    with pytest.raises(LaunchError, match=match):
        device_slots(launch, gpus)


def test_build_jobs_distinct_ports_and_logs():
    spec = spec_of(from_step=1, variants="pi,ntk,yarn", nproc=2)
    jobs = build_jobs(spec, plan_continue(spec), torchrun="/x/torchrun")
    assert all("--standalone" in j.argv for j in jobs)  # torchrun picks a free port for each job itself
    assert [j.log for j in jobs] == [
        RESULTS / "d20" / "runs" / t / "train.log" for t in ("d20-pi", "d20-ntk", "d20-yarn")
    ]
    assert all(j.argv[0] == "/x/torchrun" and j.argv[-1].endswith(f"/{j.tag}/run.json") for j in jobs)


def test_seeds_and_zero_shot_arms():
    """train.seeds replicates each variant (seed + i, data draw i, same budget); zero_shot adds a training-free tag."""

    spec = spec_of(from_step=7, variants="rope,yarn", seeds=3, zero_shot=True, steps=5)
    runs = plan_continue(spec)
    assert [r.tag for r in runs] == [
        "d20-rope",
        "d20-rope-seed1",
        "d20-rope-seed2",
        "d20-rope-zeroshot",
        "d20-yarn",
        "d20-yarn-seed1",
        "d20-yarn-seed2",
        "d20-yarn-zeroshot",
    ]
    assert [r.train.seed for r in runs[:3]] == [42, 43, 44]
    assert [r.train.data_draw for r in runs[:3]] == [0, 1, 2]  # each replicate reads its own draw of the data
    assert [r.train.steps for r in runs] == [5, 5, 5, 0] * 2
    assert {r.lineage.parent_step for r in runs} == {7} and {r.variant for r in runs[4:]} == {"yarn"}
    assert experiment_tags(spec) == ["d20", *(r.tag for r in runs)]  # the base is the reference arm
    for run in runs:
        assert variant_of_tag(spec, run.tag) == run.variant
    assert variant_of_tag(spec, "d20") == "base"
    layout_csv = {r.tag: plan_eval(spec, r.tag).core_csv.name for r in runs}
    assert (
        layout_csv["d20-yarn"] == "results_yarn.csv"
        and layout_csv["d20-yarn-seed2"] == "results_yarn-seed2.csv"
    )
    assert layout_csv["d20-yarn-zeroshot"] == "results_yarn-zeroshot.csv"
    only = plan_continue(spec_of(from_step=7, variants="pi", steps=0))
    assert [(r.tag, r.train.steps) for r in only] == [("d20-pi-zeroshot", 0)]
    assert experiment_tags(spec_of(from_step=7, variants="pi")) == ["d20-pi"]
