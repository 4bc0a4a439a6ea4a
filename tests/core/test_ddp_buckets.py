"""DDP as the trainer builds it (`rlab.core.distributed.wrap_ddp`): gradients are views into DDP's
all-reduce buckets, not a second copy, and stay correct across steps that drop them (zero_grad with
set_to_none) and across gradient accumulation. One gloo process, in this process."""

from __future__ import annotations

import torch
import torch.distributed as dist

from rlab.core.distributed import wrap_ddp
from rlab.core.gpt import GPT
from tests.core.tiny_models import noisy_gpt


def _model() -> GPT:
    return noisy_gpt(0, 0.3, sequence_len=16, vocab_size=64, n_layer=1, n_head=2, n_kv_head=2, n_embd=16)


def test_gradients_are_bucket_views_and_equal_the_plain_models(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model, plain = _model(), _model()
        ddp = wrap_ddp(model, torch.device("cpu"))
        assert ddp.gradient_as_bucket_view
        x = torch.randint(0, 64, (2, 16))
        for _ in range(2):  # the second step starts from grads set to None, as the trainer leaves them
            with ddp.no_sync():  # gradient accumulation: two micro-batches, all-reduce on the last
                ddp(x, x).backward()
            ddp(x.flip(1), x.flip(1)).backward()
            plain(x, x).backward()
            plain(x.flip(1), x.flip(1)).backward()
            # views into the bucket buffers: the grads share a few storages (one per bucket), where
            # DDP's default would give each parameter its own gradient next to its bucket slot
            storages = {p.grad.untyped_storage().data_ptr() for p in model.parameters()}
            assert len(storages) < len(list(model.parameters()))
            for (name, p), q in zip(model.named_parameters(), plain.parameters(), strict=True):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)
            model.zero_grad(set_to_none=True)
            plain.zero_grad(set_to_none=True)
    finally:
        dist.destroy_process_group()
