"""Training in one process: learning, resume equivalence, skipping non-finite steps, continuing a checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from rlab.core.checkpoint import inspect_checkpoint, load_model
from rlab.core.checkpoint_meta import read_meta
from rlab.core.train import train
from rlab.errors import TrainingError
from rlab.orchestrate.clone import clone_checkpoint
from rlab.paths import BaseLayout, checkpoint_steps, model_file, optim_file
from rlab.spec.rope import RopeSpec
from tests.core.train_helpers import SimulatedCrash, crash_after, make_run_config, train_records

pytestmark = pytest.mark.usefixtures("one_thread")


def test_loss_decreases_and_run_is_recorded(train_base, tmp_path):
    run_dir = tmp_path / "run"
    cfg = make_run_config(
        train_base, run_dir, steps=30, eval_every=15, eval_tokens=1024, save_every=10, keep_last=2
    )
    result = train(cfg)
    losses = [r["loss"] for r in train_records(run_dir)]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5  # starts at ln(512) = 6.24
    evals = train_records(run_dir, "eval")
    assert [e["step"] for e in evals] == [15, 30] and evals[1]["val_bpb"] < evals[0]["val_bpb"]
    assert result["val_bpb"] == evals[-1]["val_bpb"]
    assert train_records(run_dir, "done")[0]["step"] == 30
    rec = train_records(run_dir)[-1]
    for key in (
        "step",
        "start_step",
        "end_step",
        "loss",
        "lr_mult",
        "grad_norm",
        "tokens",
        "tokens_per_s",
        "flops_per_s",
        "mfu",
        "skipped",
        "peak_mem_mb",
        "time",
    ):
        assert key in rec
    assert rec["tokens"] == 30 * 4 * 32 and rec["flops_per_s"] > 0
    ckpt = train_base / "base_checkpoints" / "d2"
    assert checkpoint_steps(ckpt) == [20, 30]  # keep_last=2
    meta = read_meta(ckpt, 30)
    assert meta.sequence_len == 32 and meta.val_bpb == evals[-1]["val_bpb"]
    assert meta.rope.variant == "rope" and meta.rope.original_len == 32
    assert meta.loader_state.world_size == 1 and len(meta.loader_state.ranks) == 1
    assert meta.optimizer.format == "rlab.optim/2" and meta.lineage is None
    assert meta.run_config.tag == "d2" and meta.tokens_trained == 30 * 128


def test_seq_len_warmup_trains_the_same_tokens_in_shorter_rows_first(train_base, tmp_path):
    shapes: list[tuple[int, int]] = []

    def record(model):
        model.register_forward_pre_hook(lambda module, args: shapes.append(tuple(args[0].shape)))

    run_dir = tmp_path / "run"
    cfg = make_run_config(
        train_base, run_dir, steps=5, seq_len_warmup=[{"seq_len": 8, "steps": 2}, {"seq_len": 16, "steps": 1}]
    )
    train(cfg, on_model=record)
    assert shapes == [(16, 8), (16, 8), (8, 16), (4, 32), (4, 32)]
    assert [r["tokens"] for r in train_records(run_dir)] == [4 * 32 * i for i in range(1, 6)]


@pytest.mark.parametrize(
    "warmup",
    [[], [{"seq_len": 8, "steps": 4}, {"seq_len": 16, "steps": 4}]],
    ids=["plain", "resumed-inside-a-seq-len-warmup"],
)
def test_resume_matches_uninterrupted_run(train_base, tmp_path, warmup):
    common = {
        "steps": 12,
        "save_every": 6,
        "total_batch_size": 2 * 4 * 32,
        "lr": {"warmup_steps": 3},
        "seq_len_warmup": warmup,
    }
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    train(make_run_config(train_base, full_dir, tag="full", **common))

    with pytest.raises(SimulatedCrash):  # dies during step 8 (2 micro-batches per step), after saving step 6
        train(make_run_config(train_base, cut_dir, tag="cut", **common), on_model=crash_after(15))
    assert checkpoint_steps(train_base / "base_checkpoints" / "cut") == [6]
    assert train_records(cut_dir, "failed")
    train(make_run_config(train_base, cut_dir, tag="cut", resume=True, **common))

    full = {r["step"]: r for r in train_records(full_dir)}
    records = train_records(
        cut_dir
    )  # one stream: the crashed run's records up to step 6, then the resumed run's
    assert [r["step"] for r in records] == list(range(1, 13)) and not train_records(cut_dir, "failed")
    resumed = records[6:]
    for r in resumed:
        assert r["loss"] == pytest.approx(full[r["step"]]["loss"], rel=1e-6, abs=1e-6)
        assert r["lr_mult"] == full[r["step"]]["lr_mult"]
    a = torch.load(model_file(train_base / "base_checkpoints" / "full", 12))
    b = torch.load(model_file(train_base / "base_checkpoints" / "cut", 12))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-6, atol=1e-6)
    meta = read_meta(train_base / "base_checkpoints" / "cut", 12)
    assert meta.train_state.resumed_from == 6 and meta.optimizer.at_start == "restored"
    assert meta.train_state.platform is not None and meta.train_state.platform.device == "cpu"  # its numerics


def _poison_grads(at_backward: set[int]):
    """Gradient hook turning the lm_head gradient into NaN at the given backward passes."""
    count = [0]

    def attach(model):
        def hook(grad):
            count[0] += 1
            return grad * float("nan") if count[0] in at_backward else grad

        model.lm_head.weight.register_hook(hook)

    return attach


def test_nan_step_is_skipped_and_never_saved(train_base, tmp_path):
    run_dir = tmp_path / "run"
    cfg = make_run_config(train_base, run_dir, steps=8, save_every=2)
    train(cfg, on_model=_poison_grads({3, 4}))
    recs = train_records(run_dir)
    assert [r["step"] for r in recs if r.get("skip_reason")] == [3, 4]
    assert recs[2]["skip_reason"] == "non-finite grad norm"
    assert recs[-1]["skipped"] == 2 and train_records(run_dir, "done")
    assert all(r["loss"] == r["loss"] for r in recs)  # the loss itself stayed finite
    ckpt = train_base / "base_checkpoints" / "d2"
    for step in checkpoint_steps(ckpt):
        state = torch.load(model_file(ckpt, step))
        assert all(torch.isfinite(t).all() for t in state.values())
        assert torch.load(optim_file(ckpt, step, 0), weights_only=False)["format"] == "rlab.optim/2"


def test_consecutive_skips_stop_in_process(train_base, tmp_path):
    cfg = make_run_config(train_base, tmp_path / "run", steps=8, max_consecutive_skips=3, save_every=1)
    with pytest.raises(TrainingError, match="3 consecutive steps skipped"):
        train(cfg, on_model=_poison_grads({2, 3, 4, 5}))
    ckpt = train_base / "base_checkpoints" / "d2"
    assert checkpoint_steps(ckpt) == [1, 2, 3]  # step 4 raised before its save
    first = torch.load(model_file(ckpt, 1))
    for step in (2, 3):  # skipped steps leave the weights untouched
        state = torch.load(model_file(ckpt, step))
        assert all(torch.equal(state[k], first[k]) for k in first)
    assert train_records(tmp_path / "run", "failed")


def test_consecutive_skips_exit_code_and_message(train_base, tmp_path):
    cfg = make_run_config(
        train_base, tmp_path / "run", steps=8, explode_threshold=1e-9, max_consecutive_skips=2
    )
    path = tmp_path / "run.json"
    path.write_text(cfg.model_dump_json())
    proc = subprocess.run(
        [sys.executable, "-m", "rlab.core.train", str(path)],
        capture_output=True,
        text=True,
        env={**_env(), "OMP_NUM_THREADS": "1"},
        timeout=120,
    )
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert (
        len(errors) == 1 and "2 consecutive steps skipped" in errors[0] and "explode_threshold" in errors[0]
    )
    assert "Traceback" not in proc.stderr
    assert checkpoint_steps(train_base / "base_checkpoints" / "d2") == []


def _env():

    return dict(os.environ)


def test_continue_from_checkpoint_with_new_rope_and_length(train_base, tmp_path):
    train(make_run_config(train_base, tmp_path / "base_run", tag="base", steps=4))
    base_ckpt = train_base / "base_checkpoints" / "base"
    # A nanochat-style optimizer shard (foreign format) must not be loaded.
    torch.save({"some": "nanochat optimizer shard"}, optim_file(base_ckpt, 4, 0))

    run_dir = tmp_path / "yarn_run"
    cfg = make_run_config(
        train_base, run_dir, tag="base-yarn", start=("base", 4), stretch="yarn", seq_len=64, steps=3
    )
    assert train(cfg)["step"] == 7
    meta = read_meta(train_base / "base_checkpoints" / "base-yarn", 7)
    assert meta.sequence_len == 64
    assert meta.rope.variant == "yarn" and meta.rope.original_len == 32 and meta.rope.factor == 2
    assert meta.lineage.model_dump() == {"parent_tag": "base", "parent_step": 4}
    assert meta.optimizer.at_start.startswith("fresh") and "foreign" in meta.optimizer.at_start
    assert meta.tokens_trained == 4 * 128 + 3 * 4 * 64
    first = train_records(run_dir)[0]
    assert first["start_step"] == 4 and first["step"] == 5 and first["end_step"] == 7
    assert first["loss"] < 6.0  # starts from the trained weights, not from scratch (ln 512 = 6.24)
    assert json.loads((train_base / "base_checkpoints" / "base-yarn" / "meta_000007.json").read_text())[
        "tag"
    ] == ("base-yarn")


def test_bf16_autocast_learns_like_fp32(train_base, tmp_path):
    """bf16 compute with fp32 master weights: same data, loss curve within a small margin of fp32."""
    finals = {}
    for dtype in ("float32", "bfloat16"):
        run_dir = tmp_path / dtype
        train(make_run_config(train_base, run_dir, tag=f"d2-{dtype}", steps=20, dtype=dtype))
        finals[dtype] = sum(r["loss"] for r in train_records(run_dir)[-5:]) / 5
        state = torch.load(model_file(train_base / "base_checkpoints" / f"d2-{dtype}", 20))
        assert all(t.dtype == torch.float32 for t in state.values())  # master weights stay fp32
    assert finals["bfloat16"] == pytest.approx(finals["float32"], abs=0.1)


def test_continue_a_clone_keeps_the_source_step(train_base, tmp_path):
    """The orchestrator's flow: clone base@4 into a new tag, continue it there with keep_last=1."""

    train(make_run_config(train_base, tmp_path / "base_run", tag="base", steps=4))
    before = torch.load(model_file(train_base / "base_checkpoints" / "base", 4))
    clone_checkpoint(
        BaseLayout(train_base), "base", 4, "base-pi", rope=RopeSpec(variant="pi", factor=2.0), variant="pi"
    )
    cfg = make_run_config(
        train_base,
        tmp_path / "pi_run",
        tag="base-pi",
        start=("base-pi", 4),
        stretch="pi",
        seq_len=64,
        steps=3,
        save_every=1,
        keep_last=1,
    )
    train(cfg)
    assert checkpoint_steps(train_base / "base_checkpoints" / "base-pi") == [
        4,
        7,
    ]  # the source step is never pruned
    meta = read_meta(train_base / "base_checkpoints" / "base-pi", 7)
    assert meta.rope.original_len == 32 and meta.sequence_len == 64
    assert meta.optimizer.at_start == "restored from the source checkpoint"  # rlab's own format
    after = torch.load(model_file(train_base / "base_checkpoints" / "base", 4))
    assert all(torch.equal(before[k], after[k]) for k in before)  # hard links to the source stay untouched


def test_saved_checkpoint_loads_with_identical_logits(train_base, tmp_path):

    train(make_run_config(train_base, tmp_path / "base_run", tag="base", steps=2))
    captured = []
    cfg = make_run_config(
        train_base, tmp_path / "run", tag="base-yarn", start=("base", 2), stretch="yarn", seq_len=64, steps=2
    )
    train(cfg, on_model=captured.append)
    trained = captured[0].eval()
    loaded, meta = load_model(train_base / "base_checkpoints" / "base-yarn", None)
    assert meta.step == 4 and loaded.rope == trained.rope and loaded.config == trained.config
    idx = torch.randint(0, 512, (2, 64), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx), trained(idx), rtol=0, atol=0)


def test_a_nanochat_2026_base_trains_from_scratch_and_continues(train_base, tmp_path):

    model = {
        "n_layer": 2,
        "n_embd": 32,
        "n_head": 2,
        "architecture": "nanochat-2026",
        "window_pattern": "SL",
        "rotary_base": 600.0,
    }
    train(
        make_run_config(
            train_base, tmp_path / "b", tag="b26", init={"kind": "scratch", "model": model}, steps=6
        )
    )
    info = inspect_checkpoint(train_base / "base_checkpoints" / "b26", 6)
    # told apart by its own keys (smear, value embeddings, lambdas), as nanochat's 2026 checkpoints are
    assert info.architecture == "nanochat-2026" and info.window_pattern == "SL" and info.rotary_base == 600
    meta = read_meta(train_base / "base_checkpoints" / "b26", 6)
    assert meta.shape.window_pattern == "SL" and "architecture" not in meta.shape.nanochat_kwargs()
    cfg = make_run_config(
        train_base, tmp_path / "c", tag="b26-yarn", start=("b26", 6), stretch="yarn", seq_len=64, steps=2
    )
    assert train(cfg)["step"] == 8
    clone = inspect_checkpoint(train_base / "base_checkpoints" / "b26-yarn", 8)
    # the variant left its base to the checkpoint: it rotates with the base's own 600, not 2026's 100000
    assert clone.architecture == "nanochat-2026" and clone.rotary_base == 600
