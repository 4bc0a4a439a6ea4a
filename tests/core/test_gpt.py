"""The GPT core: shapes, loss, dtype handling, nanochat state dicts, accounting."""

from __future__ import annotations

import pytest
import torch

from rlab.core.checkpoint import inspect_checkpoint, load_model, save_checkpoint
from rlab.core.gpt import GPT, GPTConfig, KVCache
from rlab.errors import CheckpointError, SpecError
from rlab.spec.rope import RopeSpec
from tests.core.tiny_checkpoints import tiny_meta
from tests.core.tiny_models import TINY, noisy_gpt

torch.set_num_threads(1)


def make_model(rope: RopeSpec | None = None, seed: int = 0, **overrides) -> GPT:
    return noisy_gpt(seed, 0.2, rope, **overrides)


def test_config_from_dict_ignores_unknown_keys():
    meta = {
        "sequence_len": 2048,
        "vocab_size": 65536,
        "n_layer": 20,
        "n_head": 10,
        "n_kv_head": 10,
        "n_embd": 1280,
        "window_pattern": "L",
    }
    cfg = GPTConfig.from_dict(meta)
    assert cfg.n_layer == 20 and cfg.head_dim == 128 and cfg.padded_vocab_size == 65536
    assert GPTConfig(vocab_size=100).padded_vocab_size == 128


def test_bad_config_is_one_line_error():
    with pytest.raises(SpecError, match="n_kv_head"):
        GPT(GPTConfig(**{**TINY, "n_kv_head": 3}))
    with pytest.raises(SpecError, match="head_dim"):
        GPT(GPTConfig(**{**TINY, "n_embd": 36, "n_head": 4}))  # head_dim 9 is odd


def test_forward_shapes_loss_and_padding():
    model = make_model()
    idx = torch.randint(0, 100, (2, 16))
    logits = model(idx)
    assert logits.shape == (2, 16, 100) and logits.dtype == torch.float32  # padding (128) sliced off
    assert model.transformer.wte.weight.shape[0] == 128 and model.lm_head.weight.shape[0] == 128
    assert logits.abs().max() <= 15.0  # soft cap
    targets = idx.clone()
    targets[:, :4] = -1  # ignored
    per_token = model(idx, targets=targets, loss_reduction="none")
    assert per_token.shape == (32,)
    assert torch.all(per_token.view(2, 16)[:, :4] == 0)
    mean = model(idx, targets=targets)
    torch.testing.assert_close(mean, per_token.sum() / 24)
    ref = torch.nn.functional.cross_entropy(logits[:, 4:].reshape(-1, 100), idx[:, 4:].reshape(-1))
    torch.testing.assert_close(mean, ref)


def test_causal():
    """Changing a later token never changes earlier logits."""
    model = make_model()
    idx = torch.randint(0, 100, (1, 20))
    other = idx.clone()
    other[0, 12:] = (other[0, 12:] + 1) % 100
    torch.testing.assert_close(model(idx)[:, :12], model(other)[:, :12])


def test_init_weights_gives_uniform_prediction_and_trains():
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY))
    model.init_weights()
    idx = torch.randint(0, 100, (2, 16))
    loss = model(idx, targets=idx)
    torch.testing.assert_close(loss, torch.tensor(100.0).log())  # zero lm_head -> uniform over the real vocab
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(20):
        opt.zero_grad()
        model(idx, targets=idx).backward()
        opt.step()
    assert model(idx, targets=idx).item() < loss.item() - 0.5


def test_autocast_bf16_runs_and_returns_fp32_logits():
    model = make_model()
    idx = torch.randint(0, 100, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(idx)
        loss = model(idx, targets=idx)
    assert logits.dtype == torch.float32 and torch.isfinite(loss)
    torch.testing.assert_close(logits, model(idx), atol=0.5, rtol=0.1)


def _nanochat_state_dict(model: GPT, prefix: str = "") -> dict[str, torch.Tensor]:
    """A state dict spelled the way nanochat spells it, written out key by key (not via our own state_dict)."""
    cfg = model.config
    d, hd, vocab = cfg.n_embd, cfg.head_dim, cfg.padded_vocab_size
    g = torch.Generator().manual_seed(1)
    sd = {
        "transformer.wte.weight": torch.randn(vocab, d, generator=g),
        "lm_head.weight": torch.randn(vocab, d, generator=g),
    }
    for i in range(cfg.n_layer):
        sd[f"transformer.h.{i}.attn.c_q.weight"] = torch.randn(cfg.n_head * hd, d, generator=g)
        sd[f"transformer.h.{i}.attn.c_k.weight"] = torch.randn(cfg.n_kv_head * hd, d, generator=g)
        sd[f"transformer.h.{i}.attn.c_v.weight"] = torch.randn(cfg.n_kv_head * hd, d, generator=g)
        sd[f"transformer.h.{i}.attn.c_proj.weight"] = torch.randn(d, d, generator=g)
        sd[f"transformer.h.{i}.mlp.c_fc.weight"] = torch.randn(4 * d, d, generator=g)
        sd[f"transformer.h.{i}.mlp.c_proj.weight"] = torch.randn(d, 4 * d, generator=g)
    return {prefix + k: v for k, v in sd.items()}


@pytest.mark.parametrize("prefix", ["", "_orig_mod."])
def test_loads_nanochat_state_dict(prefix):
    model = make_model()
    sd = _nanochat_state_dict(model, prefix)
    model.load_nanochat_state_dict(sd)
    torch.testing.assert_close(
        model.transformer.h[1].mlp.c_fc.weight, sd[prefix + "transformer.h.1.mlp.c_fc.weight"]
    )
    assert not any("cos" in k or "sin" in k or "rotary" in k for k in model.state_dict())
    # bf16 weights (as nanochat saves its embedding on GPU) load too
    sd[prefix + "transformer.wte.weight"] = sd[prefix + "transformer.wte.weight"].bfloat16()
    model.load_nanochat_state_dict(sd)


def test_state_dict_errors_name_the_keys():
    model = make_model()
    sd = _nanochat_state_dict(model)
    sd["transformer.h.0.attn.c_qq.weight"] = sd.pop("transformer.h.0.attn.c_q.weight")
    with pytest.raises(CheckpointError) as err:
        model.load_nanochat_state_dict(sd)
    assert "missing keys: transformer.h.0.attn.c_q.weight" in err.value.message
    assert "unexpected keys: transformer.h.0.attn.c_qq.weight" in err.value.message
    assert "\n" not in err.value.message

    sd = _nanochat_state_dict(model)
    sd["lm_head.weight"] = torch.zeros(64, 32)
    with pytest.raises(CheckpointError, match=r"lm_head.weight \(64, 32\) != \(128, 32\)"):
        model.load_nanochat_state_dict(sd)


def test_estimate_flops_and_parameter_groups():
    model = make_model()
    cfg = model.config
    groups = model.parameter_groups()
    assert set(groups) == {"matrix", "embedding", "lm_head"}
    assert groups["embedding"] == [model.transformer.wte.weight] and groups["lm_head"] == [
        model.lm_head.weight
    ]
    non_embedding = model.num_params() - model.transformer.wte.weight.numel()
    expected = 6 * non_embedding + 12 * cfg.n_layer * cfg.n_head * cfg.head_dim * cfg.sequence_len
    assert model.estimate_flops() == expected


def test_kv_cache_grows_past_planned_length():
    model = make_model()
    idx = torch.randint(0, 100, (1, 150))
    cache = KVCache(1, 2, model.config.head_dim, 2, "cpu", torch.float32)  # no planned length: grows
    outs = [model(idx[:, :70], kv_cache=cache)] + [
        model(idx[:, i : i + 1], kv_cache=cache) for i in range(70, 150)
    ]
    assert cache.pos == 150
    torch.testing.assert_close(torch.cat(outs, 1), model(idx), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("variant", ["rope", "yarn", "dynamic-ntk"])
def test_cuda_bf16_autocast_forward_and_cached_decoding(variant):
    rope = None if variant == "rope" else RopeSpec(variant=variant, factor=4.0)
    model = make_model(rope).cuda()
    idx = torch.randint(0, 100, (2, 96), device="cuda")  # 3x sequence_len
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        full = model(idx)
        cache = KVCache(2, 2, model.config.head_dim, 2, "cuda", torch.bfloat16, seq_len=96)
        pieces = [model(idx[:, :40], kv_cache=cache)] + [
            model(idx[:, t : t + 1], kv_cache=cache) for t in range(40, 96)
        ]
    assert full.dtype == torch.float32 and torch.isfinite(full).all()
    torch.testing.assert_close(torch.cat(pieces, 1), full, atol=0.15, rtol=0.05)  # bf16 rounding only


def test_hidden_states_and_logits_at_match_forward_exactly():
    model = make_model().eval()
    idx = torch.randint(0, 100, (3, 20))
    with torch.inference_mode():
        full = model(idx)  # (B, T, V)
        h = model.hidden_states(idx)  # (B, T, C)
        assert torch.equal(model.logits_at(h), full)
        rows, pos = torch.tensor([0, 2, 2]), torch.tensor([5, 0, 19])
        torch.testing.assert_close(model.logits_at(h[rows, pos]), full[rows, pos], rtol=1e-6, atol=1e-6)


def test_packed_prefix_with_branch_mask_matches_separate_rows():
    """One row = shared prefix + two branches (positions restart after the prefix, each branch
    sees the prefix and itself) gives the logits of the two sequences run on their own."""
    model = make_model().eval()
    prefix, a, b = torch.randint(0, 100, (6,)), torch.randint(0, 100, (3,)), torch.randint(0, 100, (4,))
    packed = torch.cat([prefix, a, b])[None]  # (1, 13)
    seg = torch.tensor([0] * 6 + [1] * 3 + [2] * 4)
    positions = torch.cat([torch.arange(6), torch.arange(6, 9), torch.arange(6, 10)])[None]
    causal = torch.ones(13, 13, dtype=torch.bool).tril()
    mask = ((seg[None, :] == 0) | (seg[None, :] == seg[:, None])) & causal  # (T, T)
    with torch.inference_mode():
        h = model.hidden_states(packed, positions, mask[None, None])[0]  # (13, C)
        ref_a = model(torch.cat([prefix, a])[None])[0]
        ref_b = model(torch.cat([prefix, b])[None])[0]
        torch.testing.assert_close(model.logits_at(h[:9]), ref_a, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model.logits_at(torch.cat([h[:6], h[9:]])), ref_b, rtol=1e-5, atol=1e-5)


def test_a_variant_that_leaves_its_base_to_the_checkpoint_gets_the_models_own(tmp_path):
    """A base trained with its own rotary base: every variant applied to it or to a clone of it (base
    left null) rotates with that base, not the architecture's default; an explicit base still wins."""

    model = make_model(rotary_base=500.0)
    assert model.rope.base == 500.0 and make_model().rope.base == 10000.0
    model.set_rope(RopeSpec(variant="yarn", factor=4))
    assert model.rope.base == 500.0
    model.set_rope(RopeSpec(variant="ntk", factor=4, base=2000.0))
    assert model.rope.base == 2000.0

    model.set_rope(RopeSpec())
    meta = tiny_meta(1, model.config.nanochat_dict(), rope=model.rope.model_dump(mode="json"))
    save_checkpoint(tmp_path, 1, model.state_dict(), meta)
    info = inspect_checkpoint(tmp_path, 1)
    assert info.rotary_base == 500.0 and info.config.rotary_base == 500.0
    loaded, _ = load_model(tmp_path, 1, rope=RopeSpec(variant="pi", factor=4))
    assert loaded.rope.base == 500.0 and loaded.rope.original_len == TINY["sequence_len"]
