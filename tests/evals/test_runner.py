"""The eval worker end to end on a tiny base dir: outputs, schemas, re-running replaces, registry."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlab.core.checkpoint import save_checkpoint
from rlab.core.distributed import ALLOC_CONF_VARS, DEFAULT_ALLOC_CONF
from rlab.core.tokenizer import Tokenizer
from rlab.data.long_docs import read_long_docs_manifest
from rlab.errors import EvalError, RlabError
from rlab.evals.bpb.records import BpbDoc, BpbMetric, BpbSplit
from rlab.evals.bpb_length.records import LengthRow, TargetLoss
from rlab.evals.catalog import get as get_eval
from rlab.evals.core.records import CoreExample, CoreMetric, CoreTaskRow
from rlab.evals.passkey.records import PasskeyCell, PasskeyTrial
from rlab.evals.retrieval.records import ChoiceTrial
from rlab.evals.ruler.records import RulerCell, RulerTrial
from rlab.evals.runner import nonfinite_headlines, run_evals
from rlab.paths import model_file
from rlab.records.base import ContractError
from rlab.records.eval_doc import read_eval_doc
from rlab.records.rows import read_rows, write_rows
from rlab.records.sections import LongDocsSummary
from rlab.records.units import BpbUnit
from rlab.report.sources.comparability import mismatches
from rlab.spec.eval import EvalSpec
from rlab.spec.run import EvalRunConfig, write_config
from rlab.worker import read_error_file
from tests.core.tiny_checkpoints import tiny_meta
from tests.evals.conftest import random_gpt

TAG = "d2-rope"


def make_base(
    tiny_base_dir: Path, root: Path, seq_len: int = 32, architecture: str = "nanochat-2025"
) -> Path:
    """A base dir sharing the tiny corpus/tokenizer, plus a random checkpoint under TAG."""

    base = root / "base"
    base.mkdir(parents=True)
    for sub in ("base_data", "tokenizer", "long_docs"):
        (base / sub).symlink_to(tiny_base_dir / sub)
    tok = Tokenizer.from_directory(base / "tokenizer")
    model = random_gpt(tok.vocab_size, sequence_len=seq_len, seed=7, architecture=architecture)
    meta = tiny_meta(
        5, model.config.nanochat_dict(), architecture=model.config.architecture, tokens_trained=1000
    )
    save_checkpoint(base / "base_checkpoints" / TAG, 5, model.state_dict(), meta)
    return base


def eval_config(
    base: Path, root: Path, bundle: Path, evals=("bpb", "bpb_length", "core", "passkey", "ruler")
) -> EvalRunConfig:
    spec = EvalSpec(
        evals=evals,
        bpb_tokens=1024,
        lengths=(16, 32, 64, 100000),
        length_tokens=256,
        core_bundle=bundle,
        max_per_task=6,
        passkey_lengths=(256,),
        passkey_depths=(0.0, 0.9),
        passkey_trials=2,
        device_batch_size=4,
        ruler_tasks=("niah_multikey", "vt"),
        ruler_lengths=(400,),
        ruler_trials=2,
    )
    return EvalRunConfig(
        experiment="exp",
        tag=TAG,
        variant="rope",
        base_dir=base,
        out_dir=root / "evals" / TAG,
        core_csv=root / "results_rope.csv",
        eval=spec,
    )


def test_unknown_eval_suggests_a_name():
    with pytest.raises(
        EvalError,
        match=r"Unknown eval 'cor'\. Did you mean 'core'\? Available: bpb, bpb_length, copy_distance, core, passkey",
    ):
        get_eval("cor")


def test_rows_round_trip_through_their_models_and_blanks_are_null(tmp_path):
    rows = [
        LengthRow(length=8, bpb=float("nan"), tokens=4, docs=1),
        LengthRow(length=16, bpb=1.5, tokens=4, docs=1),
    ]
    write_rows(tmp_path / "l.csv", rows)
    assert (tmp_path / "l.csv").read_text() == "length,bpb,tokens,docs\n8,,4,1\n16,1.5,4,1\n"
    back = read_rows(tmp_path / "l.csv", LengthRow)
    assert back[0].bpb is None and back[1].bpb == 1.5
    (tmp_path / "bad.csv").write_text("length,bpb\n8,1\n")
    with pytest.raises(ContractError, match="expected length, bpb, tokens, docs"):
        read_rows(tmp_path / "bad.csv", LengthRow)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "l.csv"]  # no temp files left


def test_run_evals_writes_every_output(tiny_base_dir, tmp_path, bundle_copy):

    torch.set_num_threads(1)
    base = make_base(tiny_base_dir, tmp_path)
    cfg = eval_config(base, tmp_path, bundle_copy)
    doc = run_evals(cfg)
    out = tmp_path / "evals" / TAG
    saved = read_eval_doc(out / "eval.json")
    assert saved == doc and json.loads((out / "eval.json").read_text())["schema"] == "rlab.eval/2"
    assert saved.tag == TAG and saved.step == 5 and saved.checkpoint.tokens_trained == 1000
    assert saved.rope["variant"] == "rope" and saved.rope["original_len"] == 32 and saved.train_seq_len == 32
    assert (
        set(saved.measured)
        == {"bpb", "bpb_length", "core", "passkey", "ruler"}
        == set(saved.metrics.present())
    )
    assert saved.rope_eval["frequencies"].startswith("fixed by the RoPE config")
    run = saved.measured["bpb"]
    assert run.world_size == 1 and run.dtype == "float32" and run.code_version.package
    assert run.platform is not None and run.platform.device == "cpu" and run.platform.threads == 1
    assert run.settings == {"bpb_tokens": 1024, "seed": 1234, "window": 32} and run.data_hash
    assert saved.measured["core"].settings["max_per_task"] == 6
    m = saved.metrics
    val = m.bpb.val
    assert val.bpb > 0 and val.tokens >= 1024 and val.window == 32 and not val.whole_split
    assert [r.length for r in m.bpb_length.lengths] == [16, 32, 64]
    assert m.bpb_length.skipped[0].length == 100000
    assert m.core.partial and m.core.missing_tasks == ["squad"]
    assert len(m.passkey.cells) == 2 and m.passkey.units == 4 and m.passkey.by_length[0].n == 4
    assert len(read_rows(out / "passkey_trials.csv", PasskeyTrial)) == 4

    long_set = LongDocsSummary.model_validate(read_long_docs_manifest(base).summary())
    assert m.bpb_length.long_docs == m.ruler.long_docs == long_set
    assert saved.measured["bpb_length"].data_hash == m.bpb_length.long_docs.sha256[:12]
    assert [(c.task, c.length, c.n) for c in m.ruler.by_task] == [("niah_multikey", 400, 2), ("vt", 400, 2)]
    assert m.ruler.units == 4 and m.ruler.by_length[0].n == 4
    assert len(read_rows(out / "ruler_trials.csv", RulerTrial)) == 4
    assert len(read_rows(out / "ruler.csv", RulerCell)) == 2
    # the same items scored by likelihood, beside generation (eval.retrieval_choices, default 10)
    lik = m.passkey.likelihood
    assert lik is not None and lik.choices == 10 and lik.chance == 0.1 and lik.n == 4
    choices = read_rows(out / "passkey_choices.csv", ChoiceTrial)
    trials = read_rows(out / "passkey_trials.csv", PasskeyTrial)
    assert [(c.length, c.depth, c.trial) for c in choices] == [(t.length, t.depth, t.trial) for t in trials]
    assert all(math.isclose(c.margin, c.right_logp - c.best_other_logp) for c in choices)
    assert [(c.task, c.length, c.n) for c in m.ruler.likelihood.by_task] == [
        ("niah_multikey", 400, 2),
        ("vt", 400, 2),
    ]
    assert len(read_rows(out / "ruler_choices.csv", ChoiceTrial)) == 4
    assert len(read_rows(out / "bpb_by_length.csv", LengthRow)) == 3
    targets = read_rows(out / "bpb_targets.csv", TargetLoss)  # every scored target at every length
    len16 = [u for u in read_rows(out / "bpb_units.csv", BpbUnit) if u.metric == "len_16"]
    assert sum(t.bytes for t in targets if t.length == 16) == sum(u.bytes for u in len16)
    assert math.isclose(
        sum(t.nats for t in targets if t.length == 16), sum(u.nats for u in len16), rel_tol=1e-5
    )
    assert len(read_rows(out / "passkey.csv", PasskeyCell)) == 2
    examples = read_rows(out / "core_examples.csv", CoreExample)
    assert len(examples) == 12 and {e.task for e in examples} == {"copa", "winograd"}
    per_task = read_rows(tmp_path / "results_rope.csv", CoreTaskRow)
    assert [r.task for r in per_task] == ["copa", "winograd"] and all(r.baseline < 1 for r in per_task)
    units = read_rows(out / "bpb_units.csv", BpbUnit)
    assert {u.metric for u in units} == {"train", "val", "len_16", "len_32", "len_64"}
    val_units = [u for u in units if u.metric == "val"]
    assert sum(u.bytes for u in val_units) == val.bytes and len(val_units) == val.docs
    assert math.isclose(sum(u.nats for u in val_units), val.nats, rel_tol=1e-12)
    docs = read_rows(out / "bpb_docs.csv", BpbDoc)
    assert [d.doc for d in docs if d.split == "val"] == [u.doc for u in val_units]
    # re-running replaces the outputs (same content, nothing appended)
    before = {p.name: p.read_text() for p in out.iterdir() if p.suffix == ".csv"}
    doc2 = run_evals(cfg)
    after = {p.name: p.read_text() for p in out.iterdir() if p.suffix == ".csv"}
    assert before == after and doc2.metrics == doc.metrics
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "eval.json",
            "bpb_by_length.csv",
            "bpb_targets.csv",
            "passkey.csv",
            "passkey_trials.csv",
            "passkey_choices.csv",
            "ruler.csv",
            "ruler_trials.csv",
            "ruler_choices.csv",
            "core_examples.csv",
            "bpb_units.csv",
            "bpb_docs.csv",
        ]
    )


def test_windowed_model_records_its_windows_and_the_rule_in_the_settings(
    tiny_base_dir, tmp_path, bundle_copy
):
    """A nanochat-2026 checkpoint (full-context layers of 32) evaluated at 64 tokens: extended by default, capped
    on request; the rule is a setting of every long-context section and eval.json lists the windows."""

    torch.set_num_threads(1)
    base = make_base(tiny_base_dir, tmp_path, architecture="nanochat-2026")
    docs = {}
    for rule in ("extend", "capped"):
        cfg = eval_config(base, tmp_path / rule, bundle_copy, evals=("bpb", "bpb_length"))
        cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"attention_windows": rule})})
        docs[rule] = run_evals(cfg)
    extend, capped = docs["extend"], docs["capped"]
    assert (
        extend.attention.rule == "extend"
        and extend.attention.windowed
        and extend.attention.sequence_len == 32
    )
    caps = {r: {w.length: w.capped_at for w in d.attention.lengths} for r, d in docs.items()}
    assert caps["extend"][64] is None and caps["capped"][64] == 32 and caps["capped"][32] is None
    assert extend.measured["bpb_length"].settings["attention_windows"] == "extend"
    assert capped.measured["bpb_length"].settings["attention_windows"] == "capped"
    assert "attention_windows" not in extend.measured["bpb"].settings  # never past the training length
    assert extend.measured["bpb"].settings_hash == capped.measured["bpb"].settings_hash
    bpb = {r: {row.length: row.bpb for row in d.metrics.bpb_length.lengths} for r, d in docs.items()}
    assert bpb["extend"][32] == bpb["capped"][32] and bpb["extend"][64] != bpb["capped"][64]

    found = mismatches(capped.model_copy(update={"tag": "other"}), extend)
    assert [(m.section, m.what) for m in found] == [("bpb_length", "eval settings")]
    assert "attention_windows: 'capped' vs 'extend'" in found[0].detail


def test_partial_re_eval_keeps_the_other_sections(tiny_base_dir, tmp_path, bundle_copy):
    """Re-running fewer evals (with other settings) replaces only their sections, units and files."""

    torch.set_num_threads(1)
    base = make_base(tiny_base_dir, tmp_path)
    full = run_evals(eval_config(base, tmp_path, bundle_copy, evals=("bpb", "bpb_length", "core")))
    out = tmp_path / "evals" / TAG
    cfg = eval_config(base, tmp_path, bundle_copy, evals=("bpb",))
    cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"bpb_tokens": 400})})
    part = run_evals(cfg)
    assert part.metrics.core == full.metrics.core and part.metrics.bpb_length == full.metrics.bpb_length
    assert part.measured["core"] == full.measured["core"]
    assert part.measured["bpb"].settings["bpb_tokens"] == 400 and part.metrics.bpb != full.metrics.bpb
    units = read_rows(out / "bpb_units.csv", BpbUnit)
    assert {u.metric for u in units} == {"train", "val", "len_16", "len_32", "len_64"}
    assert len([u for u in units if u.metric == "val"]) == part.metrics.bpb.val.docs
    assert (out / "core_examples.csv").is_file() and (tmp_path / "results_rope.csv").is_file()


def test_fewer_evals_on_another_checkpoint_refuse_then_drop_with_force(tiny_base_dir, tmp_path, bundle_copy):

    torch.set_num_threads(1)
    base = make_base(tiny_base_dir, tmp_path)
    run_evals(eval_config(base, tmp_path, bundle_copy, evals=("bpb", "core", "passkey")))
    out = tmp_path / "evals" / TAG
    model = random_gpt(512, sequence_len=32, seed=8)
    save_checkpoint(
        base / "base_checkpoints" / TAG,
        9,
        model.state_dict(),
        tiny_meta(9, model.config.nanochat_dict(), tokens_trained=2000),
    )
    cfg = eval_config(base, tmp_path, bundle_copy, evals=("bpb",))
    before = (out / "eval.json").read_text()
    with pytest.raises(EvalError, match=r"holds core, passkey.*describes step 5.*step 9") as info:
        run_evals(cfg)
    assert "--force" in info.value.hint and (out / "eval.json").read_text() == before
    doc = run_evals(cfg.model_copy(update={"force": True}))
    assert doc.step == 9 and doc.metrics.present() == ["bpb"]
    assert sorted(p.name for p in out.iterdir()) == ["bpb_docs.csv", "bpb_units.csv", "eval.json"]
    assert not (tmp_path / "results_rope.csv").exists()


def test_a_metric_that_cannot_be_computed_fails_and_writes_nothing(tiny_base_dir, tmp_path, bundle_copy):

    torch.set_num_threads(1)
    base = make_base(tiny_base_dir, tmp_path)

    model = random_gpt(512, sequence_len=32, seed=7)
    ckpt = base / "base_checkpoints" / TAG
    save_checkpoint(ckpt, 6, model.state_dict(), tiny_meta(6, model.config.nanochat_dict()))
    state = model.state_dict()
    state["lm_head.weight"][0, 0] = float("nan")  # as a crashed or foreign trainer might leave it
    torch.save(state, model_file(ckpt, 6))
    with pytest.raises(RlabError, match="lm_head|not finite|non-finite"):  # the load check or the eval's own
        run_evals(eval_config(base, tmp_path, bundle_copy, evals=("bpb",)))
    assert not (tmp_path / "evals" / TAG).exists() or not any((tmp_path / "evals" / TAG).iterdir())


def test_headline_numbers_must_be_finite():

    split = dict(
        nats=1.0, bytes=1, tokens=1, docs=1, docs_available=1, token_budget=1, whole_split=False, window=4
    )
    ok = BpbMetric(convention="c", train=BpbSplit(bpb=1.2, **split), val=BpbSplit(bpb=1.3, **split))
    assert nonfinite_headlines("bpb", ok) == []
    bad = ok.model_copy(update={"val": BpbSplit(bpb=float("nan"), **split)})
    assert nonfinite_headlines("bpb", bad) == ["bpb.val.bpb"]
    core = CoreMetric(core=None, partial=False, tasks={})
    assert nonfinite_headlines("core", core) == ["core.core"]


def test_worker_renders_errors_as_one_line_and_an_error_file(tmp_path):
    bad = tmp_path / "eval_run.json"
    bad.write_text("{}")
    env = {**os.environ, "RLAB_ERROR_FILE": str(tmp_path / "error.json")}
    proc = subprocess.run(
        [sys.executable, "-m", "rlab.evals", str(bad)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: ") and "invalid run config" in proc.stderr

    message, _ = read_error_file(tmp_path / "error.json")
    assert "invalid run config" in message
    debug = subprocess.run(
        [sys.executable, "-m", "rlab.evals", str(bad)],
        env={**env, "RLAB_DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert debug.returncode != 0 and "Traceback" in debug.stderr


@pytest.mark.slow
def test_torchrun_two_ranks_match_one_process(tiny_base_dir, tmp_path, bundle_copy):
    """Under torchrun (2 CPU ranks, gloo) every eval equals the 1-process run; BPB to 1e-6 relative (fp32)."""
    base = make_base(tiny_base_dir, tmp_path)
    results = {}
    for n in (1, 2):
        cfg = eval_config(base, tmp_path / f"w{n}", bundle_copy)
        cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"device_batch_size": 2 * n + 1})})
        path = tmp_path / f"w{n}" / "eval_run.json"
        write_config(cfg, path)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={n}",
            "-m",
            "rlab.evals",
            str(path),
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[n] = read_eval_doc(tmp_path / f"w{n}" / "evals" / TAG / "eval.json")
    one, two = results[1].metrics, results[2].metrics
    assert results[2].measured["bpb"].world_size == 2
    for split in ("train", "val"):
        a, b = getattr(one.bpb, split), getattr(two.bpb, split)
        assert a.tokens == b.tokens and a.bytes == b.bytes and a.docs == b.docs
        assert math.isclose(a.bpb, b.bpb, rel_tol=1e-6), (split, a.bpb, b.bpb)
    assert results[1].measured["bpb"].data_hash == results[2].measured["bpb"].data_hash
    assert one.core.tasks == two.core.tasks
    assert one.passkey.cells == two.passkey.cells
    for a, b in zip(one.bpb_length.lengths, two.bpb_length.lengths, strict=True):
        assert a.tokens == b.tokens and abs(a.bpb - b.bpb) < 1e-5


def test_the_eval_worker_sets_the_training_allocator_option(
    tiny_base_dir, tmp_path, bundle_copy, monkeypatch
):
    """Before CUDA could initialise (here: none), under both names torch reads, as the training worker does."""

    torch.set_num_threads(1)
    for var in ALLOC_CONF_VARS:
        monkeypatch.delenv(var, raising=False)
    base = make_base(tiny_base_dir, tmp_path)
    run_evals(eval_config(base, tmp_path, bundle_copy, evals=("passkey",)))
    assert [os.environ.get(var) for var in ALLOC_CONF_VARS] == [DEFAULT_ALLOC_CONF] * 2
