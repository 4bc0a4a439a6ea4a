"""RoPE variants: frequencies against Hugging Face transformers, and their behaviour inside the model.

transformers is a test-only reference: `modeling_rope_utils.ROPE_INIT_FUNCTIONS` (and Llama's
default rotary) computes inv_freq and the attention factor in fp32 from a `PreTrainedConfig`
whose `rope_parameters` hold `rope_theta` and the variant's fields.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rlab.core import rope as R
from rlab.core.gpt import GPT, GPTConfig, KVCache
from rlab.errors import SpecError
from rlab.spec.rope import RopeSpec, RopeVariant, build_rope_spec
from tests.core.tiny_models import noisy_gpt

torch.set_num_threads(1)

HF_NAME = {"rope": "default", "pi": "linear", "dynamic-ntk": "dynamic", "yarn": "yarn", "llama3": "llama3"}
HEAD_DIMS = [16, 64, 128]
BASES = [10000.0, 500000.0]
SCALES = [1.0, 2.0, 4.0, 8.0, 3.5]
ORIGINAL_LENS = [256, 2048, 8192]


# --- the reference ---


def hf_reference(spec: RopeSpec, head_dim: int, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """(inv_freq, attention_factor) from transformers for the same configuration."""
    from transformers import PreTrainedConfig  # noqa: PLC0415 - optional dependency (transformers)
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: PLC0415 - optional dependency (transformers)

    rope_type = HF_NAME[spec.variant.value]
    params: dict = {"rope_type": rope_type, "rope_theta": spec.base}
    if rope_type != "default":
        params["factor"] = spec.factor
    if rope_type in ("yarn", "llama3"):
        params["original_max_position_embeddings"] = spec.original_len
    if rope_type == "yarn":
        params.update(beta_fast=spec.beta_fast, beta_slow=spec.beta_slow)
        if spec.attention_factor is not None:
            params["attention_factor"] = spec.attention_factor
    if rope_type == "llama3":
        params.update(low_freq_factor=spec.low_freq_factor, high_freq_factor=spec.high_freq_factor)
    config = PreTrainedConfig()
    config.hidden_size = head_dim * 4
    config.num_attention_heads = 4
    config.head_dim = head_dim
    # For "dynamic", max_position_embeddings plays the role of the original length L0.
    config.max_position_embeddings = spec.original_len
    config.rope_parameters = params
    if rope_type == "default":
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: PLC0415 - optional dependency (transformers)

        return LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)


def ntk_closed_form(spec: RopeSpec, head_dim: int) -> torch.Tensor:
    """Static NTK-aware: base b*s^(d/(d-2)), written out independently, in fp64."""
    new_base = spec.base * spec.factor ** (head_dim / (head_dim - 2))
    return torch.tensor([new_base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)


def assert_rel_close(ours: torch.Tensor, ref: torch.Tensor, what: str) -> None:
    assert ours.dtype == torch.float32 and ours.shape == ref.shape, what
    rel = ((ours.double() - ref.double()).abs() / ref.double().abs()).max().item()
    assert rel <= 1e-5, f"{what}: max relative error {rel:.2e}"


def spec_grid(variant: str):
    for base in BASES:
        for scale in SCALES:
            for original_len in ORIGINAL_LENS:
                extra: list[dict] = [{}]
                if variant == "yarn":
                    extra = [{}, {"beta_fast": 16.0, "beta_slow": 2.0}, {"attention_factor": 1.3}]
                if variant == "llama3":
                    extra = [{}, {"low_freq_factor": 2.0, "high_freq_factor": 8.0}]
                for more in extra:
                    yield RopeSpec(
                        variant=variant, base=base, factor=scale, original_len=original_len, **more
                    )


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("variant", ["rope", "pi", "yarn", "llama3"])
def test_matches_transformers(variant, head_dim):
    for spec in spec_grid(variant):
        ref_freq, ref_factor = hf_reference(spec, head_dim)
        assert_rel_close(R.inv_freq(spec, head_dim), ref_freq, f"{spec.describe()} d={head_dim}")
        assert R.attention_factor(spec) == pytest.approx(ref_factor, rel=1e-6), spec.describe()


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_dynamic_ntk_matches_transformers(head_dim):
    for spec in spec_grid("dynamic-ntk"):
        L0 = spec.original_len
        for seq_len in (None, L0 // 2, L0, L0 + 1, 2 * L0, 4 * L0, 3 * L0 + 7):
            ref_freq, ref_factor = hf_reference(spec, head_dim, seq_len)
            assert_rel_close(R.inv_freq(spec, head_dim, seq_len), ref_freq, f"{spec.describe()} L={seq_len}")
            assert R.attention_factor(spec) == ref_factor == 1.0


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_static_ntk_closed_form(head_dim):
    for spec in spec_grid("ntk"):
        ours = R.inv_freq(spec, head_dim)
        assert_rel_close(ours, ntk_closed_form(spec, head_dim), spec.describe())
        plain = R.inv_freq(spec.model_copy(update={"variant": RopeVariant.rope}), head_dim)
        assert ours[0] == plain[0]  # highest frequency untouched
        assert (plain[-1] / ours[-1]).item() == pytest.approx(spec.factor, rel=1e-5)  # lowest divided by s
        assert R.attention_factor(spec) == 1.0


def test_ntk_and_dynamic_ntk_are_different_formulas():
    spec = dict(factor=4.0, original_len=2048)
    ntk = R.inv_freq(RopeSpec(variant="ntk", **spec), 128)
    dyn_at_l0 = R.inv_freq(RopeSpec(variant="dynamic-ntk", **spec), 128, seq_len=2048)
    dyn_at_4l0 = R.inv_freq(RopeSpec(variant="dynamic-ntk", **spec), 128, seq_len=8192)
    plain = R.inv_freq(RopeSpec(), 128)
    assert torch.equal(dyn_at_l0, plain) and not torch.allclose(ntk, plain)
    # At L = s*L0 the dynamic base is b*(s*s - s + 1)^(d/(d-2)), not b*s^(d/(d-2)).
    assert not torch.allclose(ntk, dyn_at_4l0, rtol=1e-3)


@settings(max_examples=40, deadline=None)
@given(
    spec=st.builds(
        RopeSpec,
        variant=st.sampled_from(["pi", "yarn", "llama3", "dynamic-ntk"]),
        base=st.floats(100.0, 1e6),
        factor=st.floats(1.0, 32.0),
        original_len=st.integers(64, 32768),
        beta_fast=st.floats(8.0, 64.0),
        beta_slow=st.floats(0.5, 4.0),
    ),
    half_dim=st.integers(4, 96),
)
def test_matches_transformers_random(spec, half_dim):
    seq_len = 3 * spec.original_len if spec.variant == "dynamic-ntk" else None
    ref_freq, ref_factor = hf_reference(spec, 2 * half_dim, seq_len)
    assert_rel_close(R.inv_freq(spec, 2 * half_dim, seq_len), ref_freq, spec.describe())
    assert R.attention_factor(spec) == pytest.approx(ref_factor, rel=1e-6)


def test_yarn_leaves_high_frequencies_and_interpolates_low_ones():
    spec = RopeSpec(variant="yarn", factor=4.0, original_len=2048)
    ours, plain = R.inv_freq(spec, 128), R.inv_freq(RopeSpec(), 128)
    torch.testing.assert_close(ours[:10], plain[:10], rtol=0, atol=0)
    torch.testing.assert_close(ours[-10:], plain[-10:] / 4)
    assert R.attention_factor(spec) == pytest.approx(0.1 * math.log(4) + 1)


def test_pi_scales_positions_by_one_over_factor():
    spec = RopeSpec(variant="pi", factor=4.0, original_len=64)
    tables, plain = R.RotaryTables(spec, 32), R.RotaryTables(RopeSpec(), 32)
    cos, sin = tables.get(0, 400, "cpu")
    cos_p, sin_p = plain.get(0, 100, "cpu")
    torch.testing.assert_close(cos[:, ::4], cos_p, atol=1e-6, rtol=0)  # position 4p under PI == p under rope
    torch.testing.assert_close(sin[:, ::4], sin_p, atol=1e-6, rtol=0)


# --- the rotation ---


def test_rotation_convention_dtype_and_relative_positions():
    torch.manual_seed(0)
    d = 8
    x = torch.randn(1, 1, 1, d)
    cos, sin = torch.tensor([0.6, 1.0, 0.0, -1.0]), torch.tensor([0.8, 0.0, 1.0, 0.0])
    y = R.apply_rotary(x, cos, sin)
    x1, x2 = x[..., :4], x[..., 4:]
    torch.testing.assert_close(y[..., :4], x1 * cos + x2 * sin)  # nanochat: y1 = x1 cos + x2 sin
    torch.testing.assert_close(y[..., 4:], -x1 * sin + x2 * cos)  # y2 = -x1 sin + x2 cos
    # bf16 in -> bf16 out, with fp32 tables
    tables = R.RotaryTables(RopeSpec(variant="yarn", factor=4.0, original_len=16), 64)
    cos, sin = tables.get(0, 50, "cpu")
    assert cos.dtype == torch.float32
    xb = torch.randn(2, 50, 3, 64, dtype=torch.bfloat16)
    assert R.apply_rotary(xb, cos, sin).dtype == torch.bfloat16
    # rotation keeps norms, and q.k depends only on the position difference
    q, k = torch.randn(1, 1, 1, 64), torch.randn(1, 1, 1, 64)

    def dot(m: int, n: int) -> float:
        cm, sm = tables.get(m, 1, "cpu")
        cn, sn = tables.get(n, 1, "cpu")
        return (R.apply_rotary(q, cm, sm) * R.apply_rotary(k, cn, sn)).sum().item()

    assert dot(3, 1) == pytest.approx(dot(40, 38), rel=1e-4, abs=1e-5)
    c7, s7 = tables.get(7, 1, "cpu")
    torch.testing.assert_close(R.apply_rotary(q, c7, s7).norm(), q.norm())


def test_tables_grow_lazily_to_any_length():
    tables = R.RotaryTables(RopeSpec(), 16)
    assert tables._tables == {}
    cos, sin = tables.get(200_000, 4, "cpu")  # far beyond any "10x" table
    assert cos.shape == (1, 4, 1, 8)
    expected = torch.tensor(200_001.0, dtype=torch.float64).cos().item()
    assert cos[0, 1, 0, 0].item() == pytest.approx(expected, abs=1e-6)  # position 200001, frequency 1


# --- inside the model ---

TINY = dict(sequence_len=16, vocab_size=100, n_layer=2, n_head=4, n_kv_head=2, n_embd=32)
VARIANT_SPECS = {
    "rope": RopeSpec(),
    "pi": RopeSpec(variant="pi", factor=4.0),
    "ntk": RopeSpec(variant="ntk", factor=4.0),
    "dynamic-ntk": RopeSpec(variant="dynamic-ntk", factor=4.0),
    "yarn": RopeSpec(variant="yarn", factor=4.0, beta_fast=4.0, beta_slow=1.0),  # small L0: a visible ramp
    "llama3": RopeSpec(variant="llama3", factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0),
}


def base_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    return noisy_gpt(seed, 0.3, **TINY).state_dict()


def build(rope: RopeSpec | None, weights: dict[str, torch.Tensor]) -> GPT:
    model = GPT(GPTConfig(**TINY), rope)
    model.load_nanochat_state_dict(weights)
    return model.eval()


def test_original_len_defaults_to_sequence_len():
    model = GPT(GPTConfig(**TINY), RopeSpec(variant="yarn", factor=2.0))
    assert model.rope.original_len == 16
    model.set_rope(RopeSpec(variant="pi", factor=2.0, original_len=8))
    assert model.rope.original_len == 8 and model.rope.variant is RopeVariant.pi


@pytest.mark.parametrize("variant", list(VARIANT_SPECS))
def test_kv_cache_decoding_equals_full_forward(variant):
    """Prefill a chunk, decode token by token past L0 = 16, then a chunk again: same logits as one forward."""
    model = build(VARIANT_SPECS[variant], base_weights())
    torch.manual_seed(1)
    idx = torch.randint(0, 100, (2, 56))
    with torch.no_grad():
        full = model(idx)  # (2, 56, 100)
        cache = KVCache(2, 2, model.config.head_dim, 2, "cpu", torch.float32, seq_len=56)
        pieces = [model(idx[:, :6], kv_cache=cache)]
        pieces += [model(idx[:, t : t + 1], kv_cache=cache) for t in range(6, 40)]
        pieces.append(model(idx[:, 40:], kv_cache=cache))
    assert cache.pos == 56
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=2e-5, rtol=1e-5)


def test_dynamic_ntk_cache_without_planned_length_within_original_len():
    """Within L0 the dynamic variant is plain rope, so even an unplanned cache equals the full forward."""
    model = build(VARIANT_SPECS["dynamic-ntk"], base_weights())
    idx = torch.randint(0, 100, (1, 16))
    with torch.no_grad():
        cache = KVCache(1, 2, model.config.head_dim, 2, "cpu", torch.float32)
        pieces = [model(idx[:, t : t + 1], kv_cache=cache) for t in range(16)]
        torch.testing.assert_close(torch.cat(pieces, dim=1), model(idx), atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", list(VARIANT_SPECS))
def test_scale_one_is_the_base_model(variant):
    weights = base_weights()
    idx = torch.randint(0, 100, (2, 16))
    with torch.no_grad():
        base = build(None, weights)(idx)
        at_one = build(VARIANT_SPECS[variant].model_copy(update={"factor": 1.0}), weights)(idx)
    assert torch.equal(at_one, base), f"{variant} at scale 1: max diff {(at_one - base).abs().max():.2e}"


def test_rope_ignores_factor_and_dynamic_ntk_is_base_within_original_len():
    weights = base_weights()
    idx = torch.randint(0, 100, (2, 16))  # T = L0
    with torch.no_grad():
        base = build(None, weights)(idx)
        assert torch.equal(build(RopeSpec(factor=4.0), weights)(idx), base)
        assert torch.equal(build(VARIANT_SPECS["dynamic-ntk"], weights)(idx), base)
        # ...and the extension variants really change the model at scale 4
        for variant in ("pi", "ntk", "yarn", "llama3"):
            assert not torch.allclose(build(VARIANT_SPECS[variant], weights)(idx), base), variant


def test_yarn_scales_attention_logits_by_mscale_squared(monkeypatch):
    """Spy on the real SDPA call: same q and k, softmax scale (hence every logit) multiplied by mscale^2."""
    calls: list[tuple[torch.Tensor, torch.Tensor, float]] = []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, *args, **kwargs):
        calls.append((q.detach().clone(), k.detach().clone(), kwargs["scale"]))
        return real_sdpa(q, k, v, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    weights = base_weights()
    idx = torch.randint(0, 100, (1, 32))
    yarn = RopeSpec(variant="yarn", factor=4.0)
    mscale = R.attention_factor(yarn)
    assert mscale == pytest.approx(0.1 * math.log(4.0) + 1)

    def attention_logits(spec: RopeSpec) -> tuple[torch.Tensor, torch.Tensor]:
        calls.clear()
        with torch.no_grad():
            out = build(spec, weights)(idx)
        q, k, scale = calls[0]  # layer 0: identical inputs for both models
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)  # GQA -> (B, H, T, d)
        return (q @ k.transpose(-1, -2)) * scale, out  # (B, H, T, T)

    scaled, out_scaled = attention_logits(yarn)
    unscaled, out_unscaled = attention_logits(yarn.model_copy(update={"attention_factor": 1.0}))
    torch.testing.assert_close(scaled, unscaled * mscale**2)
    assert calls[0][2] == pytest.approx(1 / math.sqrt(8))
    mask = torch.ones(32, 32, dtype=torch.bool).tril()
    probs = lambda logits: logits.masked_fill(~mask, float("-inf")).softmax(-1)  # noqa: E731
    assert not torch.allclose(probs(scaled), probs(unscaled), atol=1e-3)  # sharper attention...
    assert not torch.allclose(out_scaled, out_unscaled, atol=1e-4)  # ...and different model outputs


def test_long_forward_far_past_training_length():
    model = build(VARIANT_SPECS["yarn"], base_weights())
    with torch.no_grad():
        logits = model(torch.randint(0, 100, (1, 400)))  # 25x sequence_len: no assert, no fixed table
    assert torch.isfinite(logits).all()


# --- bad input ---


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"variant": "pi", "factor": 0.0}, "factor"),
        ({"variant": "rope", "factor": -1.0}, "factor"),  # the spec bound: "factor: must be from 0 to 1,024"
        ({"variant": "yarn", "factor": 0.5}, "factor"),
        ({"variant": "yarn", "factor": 2.0, "beta_fast": 1.0, "beta_slow": 1.0}, "beta_fast"),
        (
            {"variant": "llama3", "factor": 2.0, "low_freq_factor": 4.0, "high_freq_factor": 2.0},
            "high_freq_factor",
        ),
    ],
)
def test_bad_spec_names_the_parameter(fields, name):
    with pytest.raises(ValidationError, match=f"{name}(: |\n  Value error, )must be"):  # model check or bound
        RopeSpec(**fields)
    with pytest.raises(SpecError, match=f"^{name}: must be") as err:
        build_rope_spec(**fields)
    assert "\n" not in err.value.message


def test_unknown_variant_and_odd_head_dim():
    with pytest.raises(SpecError, match=r"Unknown RoPE variant 'yarm'\. Did you mean 'yarn'\? Available: "):
        RopeSpec(variant="yarm")
    with pytest.raises(SpecError, match=r"^head_dim: must be a positive even number \(got 7\)"):
        R.inv_freq(RopeSpec(), 7)
    with pytest.raises(SpecError, match="^original_len: required"):
        R.inv_freq(RopeSpec(variant="yarn", factor=2.0), 64)
