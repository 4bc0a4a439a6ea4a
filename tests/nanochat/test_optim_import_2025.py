"""Importing nanochat's per-rank optimizer shards: the reference's 2 ranks, re-sharded to 1 and 4, and bad shards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from rlab.core.checkpoint_meta import OptimizerImport
from rlab.core.gpt import GPT, GPTConfig
from rlab.core.optim import build_optimizers
from rlab.nanochat.gen2025.optimizer import nanochat_muon_momentum
from rlab.nanochat.optim_import import ImportReport, import_nanochat_optimizer
from rlab.spec.train import LRSpec
from tests.conftest import nanochat_reference_path, needs_nanochat_reference
from tests.nanochat.optim_helpers import model_and_optimizers, optimizer_state

REF = nanochat_reference_path("d314e96")
CKPT = REF / "base_checkpoints" / "d2"

pytestmark = needs_nanochat_reference(CKPT / "model_000020.pt")


def _nanochat_layout(full: dict, params: list[tuple[str, torch.Tensor]], world: int) -> list[list[dict]]:
    """Write `full` the way nanochat d314e96 shards it over `world` ranks (DistAdamW + DistMuon)."""
    adam = ["lm_head.weight", "transformer.wte.weight"]
    matrix = [(n, p) for n, p in params if n.startswith("transformer.h.")]
    shards = []
    for r in range(world):
        a_state = {}
        for i, n in enumerate(adam):
            rows = full[n]["exp_avg"].shape[0] // world
            a_state[i] = {
                "step": torch.tensor(int(full[n]["step"]), dtype=torch.int64),
                **{k: full[n][k][r * rows : (r + 1) * rows].clone() for k in ("exp_avg", "exp_avg_sq")},
            }
        a_groups = [
            {"lr": 0.1, "betas": (0.8, 0.95), "eps": 1e-10, "weight_decay": 0.0, "params": [i]}
            for i in range(len(adam))
        ]
        m_groups, m_state, idx = [], {}, 0
        for shape in sorted({tuple(p.shape) for _, p in matrix}):
            names = [n for n, p in matrix if tuple(p.shape) == shape]
            m_groups.append(
                {
                    "zero_buffer": torch.zeros(shape),
                    "lr": 0.02,
                    "momentum": 0.9,
                    "nesterov": True,
                    "ns_steps": 5,
                    "params": list(range(idx, idx + len(names))),
                }
            )
            for j, n in enumerate(names):
                if j % world == r:
                    m_state[idx + j] = {"momentum_buffer": full[n]["momentum_buffer"].clone()}
            idx += len(names)
        shards.append(
            [{"state": a_state, "param_groups": a_groups}, {"state": m_state, "param_groups": m_groups}]
        )
    return shards


def test_reference_shards_rebuild_the_full_state():
    model, optimizers = model_and_optimizers(CKPT)
    report = import_nanochat_optimizer(CKPT, 20, model, optimizers)
    assert report.restored and report.world_size == 2 and report.nanochat_step == 20 and report.tensors == 16
    assert (
        report.muon_momentum
        == pytest.approx(nanochat_muon_momentum(20))
        == pytest.approx(0.85 + 0.1 * 20 / 300)
    )
    full = optimizer_state(model, optimizers)
    shards = [torch.load(CKPT / f"optim_000020_rank{r}.pt", weights_only=True) for r in range(2)]
    # lm_head is AdamW group 0, index 0: rows 0..2047 on rank 0, 2048..4095 on rank 1
    torch.testing.assert_close(
        full["lm_head.weight"]["exp_avg"][2048:], shards[1][0]["state"][0]["exp_avg"], rtol=0, atol=0
    )
    assert float(full["lm_head.weight"]["step"]) == 20
    # DistMuon groups by sorted shape: (128, 128) holds c_q, c_k, c_v, c_proj of layer 0 then of layer 1;
    # c_k of layer 0 is its 2nd parameter (index 1), owned by rank 1
    torch.testing.assert_close(
        full["transformer.h.0.attn.c_k.weight"]["momentum_buffer"],
        shards[1][1]["state"][1]["momentum_buffer"],
        rtol=0,
        atol=0,
    )
    assert optimizers[0].param_groups[0]["momentum"] == pytest.approx(report.muon_momentum)
    assert optimizers[1].param_groups[0]["initial_lr"] > 0  # the run's own peaks are kept


@pytest.mark.parametrize("world", [1, 4, 8])
def test_any_world_size_gives_the_same_state(tmp_path, world):
    model, optimizers = model_and_optimizers(CKPT)
    assert import_nanochat_optimizer(CKPT, 20, model, optimizers).restored
    full = optimizer_state(model, optimizers)
    ckpt = tmp_path / "d2"
    ckpt.mkdir()
    for name in ("model_000020.pt", "meta_000020.json"):
        shutil.copy(CKPT / name, ckpt / name)
    for r, shard in enumerate(_nanochat_layout(full, list(model.named_parameters()), world)):
        torch.save(shard, ckpt / f"optim_000020_rank{r}.pt")
    model2, optimizers2 = model_and_optimizers(ckpt)
    report = import_nanochat_optimizer(ckpt, 20, model2, optimizers2)
    assert report.restored and report.world_size == world
    again = optimizer_state(model2, optimizers2)
    assert again.keys() == full.keys()
    for name in full:
        for key in full[name]:
            torch.testing.assert_close(again[name][key], full[name][key], rtol=0, atol=0)


def _copy(tmp_path: Path) -> Path:
    ckpt = tmp_path / "d2"
    shutil.copytree(CKPT, ckpt)
    return ckpt


@pytest.mark.parametrize(
    "damage,reason",
    [
        (lambda d: (d / "optim_000020_rank1.pt").unlink(), "shard missing"),
        (lambda d: (d / "optim_000020_rank0.pt").unlink(), "rank 0 missing"),
        (lambda d: [p.unlink() for p in d.glob("optim_*")], "no optimizer shards"),
        (
            lambda d: (d / "optim_000020_rank1.pt").write_bytes(b"\x80\x02truncated"),
            "cannot read optim_000020_rank1",
        ),
        (
            lambda d: torch.save({"format": "something else"}, d / "optim_000020_rank0.pt"),
            "no optimizer format",
        ),
    ],
)
def test_bad_shards_leave_a_fresh_optimizer_and_say_why(tmp_path, damage, reason):
    ckpt = _copy(tmp_path)
    damage(ckpt)
    model, optimizers = model_and_optimizers(CKPT)
    report = import_nanochat_optimizer(ckpt, 20, model, optimizers)
    assert not report.restored and reason in report.reason
    assert all(not opt.state for opt in optimizers)  # untouched: a fresh optimizer
    assert report.describe().startswith("not imported")


def test_shards_of_another_model_are_refused(tmp_path):

    model = GPT(GPTConfig(sequence_len=256, vocab_size=4096, n_layer=2, n_head=1, n_kv_head=1, n_embd=64))
    optimizers = build_optimizers(model, LRSpec(), 64)
    report = import_nanochat_optimizer(CKPT, 20, model, optimizers)
    assert not report.restored and "shape" in report.reason
    assert all(not opt.state for opt in optimizers)


def test_the_import_report_is_the_meta_record_plus_its_tensor_count(tmp_path):
    """`ImportReport` declares only what the log adds (`tensors`); the rest is `OptimizerImport`'s, and the
    meta's `optimizer.import` holds every one of its fields, in its order, nulls included when nothing loaded."""

    assert set(ImportReport.model_fields) - set(OptimizerImport.model_fields) == {"tensors"}
    model, optimizers = model_and_optimizers(CKPT)
    report = import_nanochat_optimizer(CKPT, 20, model, optimizers)
    assert report.restored and report.tensors == 16
    written = json.loads(json.dumps(report.to_meta().model_dump()))
    assert type(report.to_meta()) is OptimizerImport and list(written) == [
        "restored",
        "reason",
        "format",
        "world_size",
        "nanochat_step",
        "muon_momentum",
        "notes",
    ]
    assert written["world_size"] == 2 and written["nanochat_step"] == 20 and written["reason"] == "imported"
    assert OptimizerImport.model_validate(written) == report.to_meta()  # read back: the same record
    failed = import_nanochat_optimizer(tmp_path, 20, model, optimizers).to_meta().model_dump()
    assert failed == {
        "restored": False,
        "reason": f"no optimizer shards optim_000020_rank*.pt in {tmp_path}",
        "format": None,
        "world_size": None,
        "nanochat_step": None,
        "muon_momentum": None,
        "notes": [],
    }
