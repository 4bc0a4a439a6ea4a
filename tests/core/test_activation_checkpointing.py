"""Activation checkpointing: which blocks a setting names, the same loss and gradients to the float, the
same training run, and torch.compile tracing it."""

from __future__ import annotations

import pytest
import torch

from rlab.activation_checkpointing import candidates, checkpointed_layers, every
from rlab.core.gpt import GPT, GPTConfig
from rlab.core.train import train
from tests.core.train_helpers import make_run_config, train_records


def test_settings_name_the_blocks():
    assert checkpointed_layers("off", 4) == frozenset()
    assert checkpointed_layers("all", 4) == {0, 1, 2, 3}
    assert checkpointed_layers("every-2", 5) == {0, 2, 4}
    assert every("every-3") == 3 and every("all") == 1 and every("off") is None
    with pytest.raises(ValueError):
        every("auto")
    assert candidates(20) == ["off", "every-4", "every-3", "every-2", "all"]  # 0, 5, 7, 10, 20 blocks
    assert candidates(2) == ["off", "every-4", "all"]  # 0, 1, 2 blocks


def _loss_and_grads(setting: str, architecture: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
    torch.manual_seed(0)
    config = GPTConfig(sequence_len=64, vocab_size=256, n_layer=3, n_head=2, n_kv_head=2, n_embd=64)
    config.architecture = architecture
    model = GPT(config)
    model.init_weights()
    for p in model.parameters():  # zero-initialised projections would leave most gradients zero
        torch.nn.init.normal_(p, std=0.05) if p.dim() > 1 else None
    model.set_activation_checkpointing(setting)
    x = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(1))
    loss = model(x, x)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("architecture", ["nanochat-2025", "nanochat-2026"])
@pytest.mark.parametrize("setting", ["all", "every-2"])
def test_checkpointed_blocks_give_the_same_loss_and_gradients(setting, architecture):
    loss, grads = _loss_and_grads("off", architecture)
    loss_ck, grads_ck = _loss_and_grads(setting, architecture)
    assert torch.equal(loss, loss_ck)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads_ck, strict=True))


@pytest.mark.usefixtures("one_thread")
def test_a_checkpointed_training_run_matches_one_without_to_the_float(train_base, tmp_path):
    losses = {}
    for setting in ("off", "all"):
        run_dir = tmp_path / setting
        train(
            make_run_config(
                train_base, run_dir, tag=f"ck-{setting}", steps=4, activation_checkpointing=setting
            )
        )
        losses[setting] = [r["loss"] for r in train_records(run_dir)]
    assert len(losses["off"]) == 4 and losses["off"] == losses["all"]
