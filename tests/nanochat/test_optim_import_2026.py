"""Importing nanochat-2026's MuonAdamW shards (the 92d63d4 reference, 2 ranks) into rlab's optimizers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from rlab.nanochat.gen2026.optimizer import nanochat_2026_muon_momentum
from rlab.nanochat.optim_import import import_nanochat_optimizer
from tests.conftest import nanochat_reference_path, needs_nanochat_reference
from tests.nanochat.optim_helpers import model_and_optimizers, optimizer_state

REF = nanochat_reference_path("head")
CKPT = REF / "base_checkpoints" / "d2"

pytestmark = needs_nanochat_reference(CKPT / "model_000020.pt")


def _shards(directory: Path = CKPT) -> list[dict]:
    return [torch.load(directory / f"optim_000020_rank{r}.pt", weights_only=True) for r in range(2)]


def test_every_parameter_gets_nanochat_state():
    model, optimizers = model_and_optimizers(CKPT)
    report = import_nanochat_optimizer(CKPT, 20, model, optimizers)
    assert report.restored, report.reason
    assert (report.world_size, report.nanochat_step) == (2, 20) and "MuonAdamW" in report.format
    assert (
        report.muon_momentum
        == pytest.approx(nanochat_2026_muon_momentum(20))
        == pytest.approx(0.85 + 0.12 * 20 / 400)
    )
    assert any("second-moment" in n for n in report.notes) and "dropped" in report.describe()
    state = optimizer_state(model, optimizers)
    assert set(state) == {n for n, _ in model.named_parameters()}  # nothing left fresh
    shards = _shards()
    # AdamW index 2 = value_embeds.1 (4096 x 128, sharded by rows); index 4 = x0_lambdas (small: full per rank)
    ve = state["value_embeds.1.weight"]
    torch.testing.assert_close(ve["exp_avg_sq"][2048:], shards[1]["state"][2]["exp_avg_sq"], rtol=0, atol=0)
    torch.testing.assert_close(
        state["x0_lambdas"]["exp_avg"], shards[0]["state"][4]["exp_avg"], rtol=0, atol=0
    )
    assert float(state["smear_lambda"]["step"]) == 20
    # Muon (128, 128) group: c_q, c_k, c_v, c_proj of layer 0, then layer 1; chunk of 4 per rank, so
    # layer 1's c_k (5th) is rank 1's stacked buffer [1]; the (2, 12) value gate is its own group
    torch.testing.assert_close(
        state["transformer.h.1.attn.c_k.weight"]["momentum_buffer"],
        shards[1]["state"][9]["momentum_buffer"][1],
        rtol=0,
        atol=0,
    )
    torch.testing.assert_close(
        state["transformer.h.1.attn.ve_gate.weight"]["momentum_buffer"],
        shards[0]["state"][8]["momentum_buffer"][0],
        rtol=0,
        atol=0,
    )


def test_imported_adamw_step_is_nanochat_s_update_rule():
    """One AdamW step on the imported state equals nanochat's formula (its decoupled decay, bias
    correction from step 21) for a scalar group: x0_lambdas with betas (0.96, 0.95)."""
    model, optimizers = model_and_optimizers(CKPT)
    assert import_nanochat_optimizer(CKPT, 20, model, optimizers).restored
    adamw = optimizers[-1]
    group = next(g for g in adamw.param_groups if g["name"] == "x0")
    assert group["betas"] == (0.96, 0.95) and group["weight_decay"] == 0.0
    p = group["params"][0]
    m, v = (adamw.state[p][k].clone() for k in ("exp_avg", "exp_avg_sq"))
    before = p.detach().clone()
    grad = torch.linspace(-1, 1, p.numel()).view_as(p)
    for q in model.parameters():
        q.grad = torch.zeros_like(q)
    p.grad = grad.clone()
    adamw.step()
    b1, b2 = group["betas"]
    m1, v1 = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad**2
    step = 21
    expected = before - group["lr"] * (m1 / (1 - b1**step)) / ((v1 / (1 - b2**step)).sqrt() + 1e-10)
    torch.testing.assert_close(p.detach(), expected, rtol=1e-6, atol=1e-7)


def test_a_missing_rank_leaves_the_optimizer_fresh(tmp_path):
    ckpt = tmp_path / "d2"
    ckpt.mkdir()
    for name in ("model_000020.pt", "meta_000020.json", "optim_000020_rank0.pt"):
        shutil.copy(CKPT / name, ckpt / name)
    model, optimizers = model_and_optimizers(ckpt)
    report = import_nanochat_optimizer(ckpt, 20, model, optimizers)
    assert not report.restored and "makes (2048, 128)" in report.reason
    assert not any(opt.state for opt in optimizers)
