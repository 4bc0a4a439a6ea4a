"""The variants with parameters of their own (abf, ntk-by-parts, longrope) and `layers: global`, against Hugging
Face transformers.

transformers is the reference, as for the other variants (`tests/core/test_rope.py`): abf is its `default` at
the raised `rope_theta`, ntk-by-parts its `yarn` with `attention_factor: 1.0`, longrope its `longrope` (short
factors up to `original_max_position_embeddings`, long ones past it), and `layers: global` its per-layer-type
`rope_parameters` (`full_attention` scaled, `sliding_attention` plain), as Gemma 3 writes them.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rlab.core import rope as R
from rlab.core.gpt import GPT, KVCache
from rlab.errors import SpecError
from rlab.spec.loading import load_spec
from rlab.spec.rope import RopeSpec, build_rope_spec, default_variant_specs
from tests.core.test_rope import BASES, HEAD_DIMS, ORIGINAL_LENS, SCALES, assert_rel_close
from tests.core.tiny_models import noisy_gpt

torch.set_num_threads(1)


def hf_config(head_dim: int, params: dict, max_positions: int | None = None):
    from transformers import PreTrainedConfig  # noqa: PLC0415 - optional dependency (transformers)

    config = PreTrainedConfig()
    config.hidden_size = head_dim * 4
    config.num_attention_heads = 4
    config.head_dim = head_dim
    config.max_position_embeddings = max_positions
    config.rope_parameters = params
    return config


def hf_yarn(spec: RopeSpec, **more: float) -> dict:
    """YaRN's `rope_parameters` in transformers' vocabulary for `spec`'s base, factor, length and betas."""
    return {
        "rope_type": "yarn",
        "rope_theta": spec.base,
        "factor": spec.factor,
        "original_max_position_embeddings": spec.original_len,
        "beta_fast": spec.beta_fast,
        "beta_slow": spec.beta_slow,
        **more,
    }


def hf_params(spec: RopeSpec) -> dict:
    """`rope_parameters` in transformers' vocabulary for one of the new variants."""
    v = spec.variant.value
    if v == "abf":
        return {"rope_type": "default", "rope_theta": spec.new_base}
    if v == "ntk-by-parts":
        return hf_yarn(spec, attention_factor=1.0)
    params = {
        "rope_type": "longrope",
        "rope_theta": spec.base,
        "factor": spec.factor,
        "original_max_position_embeddings": spec.original_len,
        "short_factor": spec.short_factor,
        "long_factor": spec.long_factor,
    }
    if spec.attention_factor is not None:
        params["attention_factor"] = spec.attention_factor
    return params


def hf_reference(spec: RopeSpec, head_dim: int, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: PLC0415 - optional dependency (transformers)
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: PLC0415 - optional dependency (transformers)

    params = hf_params(spec)
    config = hf_config(head_dim, params, spec.original_len)
    if params["rope_type"] == "default":
        return LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu", seq_len=seq_len)


def longrope_factors(head_dim: int, factor: float, seed: int) -> dict[str, list[float]]:
    """Factors of LongRoPE's shape: near 1 at high frequencies, rising to about the factor at the low ones."""
    gen = torch.Generator().manual_seed(seed)
    ramp = torch.linspace(0, 1, head_dim // 2, dtype=torch.float64)
    noise = 1 + 0.1 * torch.rand(head_dim // 2, generator=gen, dtype=torch.float64)
    return {
        "short_factor": (1 + 0.2 * ramp * noise).tolist(),
        "long_factor": (1 + (factor - 1) * ramp**2 * noise).tolist(),
    }


def spec_grid(variant: str, head_dim: int):
    for base in BASES:
        for scale in SCALES:
            for original_len in ORIGINAL_LENS:
                common = dict(variant=variant, base=base, factor=scale, original_len=original_len)
                if variant == "abf":
                    for raise_by in (5.0, 50.0):
                        yield RopeSpec(**{**common, "new_base": base * raise_by})
                elif variant == "ntk-by-parts":
                    yield RopeSpec(**common)
                    yield RopeSpec(**common, beta_fast=16.0, beta_slow=2.0)
                else:
                    factors = longrope_factors(head_dim, scale, seed=original_len)
                    yield RopeSpec(**common, **factors)
                    yield RopeSpec(**common, **factors, attention_factor=1.25)


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("variant", ["abf", "ntk-by-parts", "longrope"])
def test_matches_transformers(variant, head_dim):
    for spec in spec_grid(variant, head_dim):
        L0 = spec.original_len
        for seq_len in (None, L0, L0 + 1, 4 * L0) if variant == "longrope" else (None,):
            ref_freq, ref_factor = hf_reference(spec, head_dim, seq_len)
            ours = R.inv_freq(spec, head_dim, seq_len)
            assert_rel_close(ours, ref_freq, f"{spec.describe()} d={head_dim} L={seq_len}")
            assert R.attention_factor(spec) == pytest.approx(ref_factor, rel=1e-6), spec.describe()


@settings(max_examples=30, deadline=None)
@given(
    half_dim=st.integers(4, 96),
    base=st.floats(100.0, 1e6),
    scale=st.floats(1.0, 32.0),
    original_len=st.integers(64, 32768),
    seed=st.integers(0, 1000),
    beyond=st.booleans(),
)
def test_longrope_matches_transformers_random(half_dim, base, scale, original_len, seed, beyond):
    spec = RopeSpec(
        variant="longrope",
        base=base,
        factor=scale,
        original_len=original_len,
        **longrope_factors(2 * half_dim, scale, seed),
    )
    seq_len = 2 * original_len if beyond else original_len
    ref_freq, ref_factor = hf_reference(spec, 2 * half_dim, seq_len)
    assert_rel_close(R.inv_freq(spec, 2 * half_dim, seq_len), ref_freq, spec.describe())
    assert R.attention_factor(spec) == pytest.approx(ref_factor, rel=1e-6)


def test_longrope_attention_factor_from_positions_as_phi3():
    """Phi-3 leaves `factor` out: transformers takes max_position_embeddings / L0; rlab's factor is that ratio."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: PLC0415 - optional dependency (transformers)

    spec = RopeSpec(
        variant="longrope", factor=32.0, base=10000.0, original_len=4096, **longrope_factors(96, 32, 0)
    )
    params = {k: v for k, v in hf_params(spec).items() if k != "factor"}
    _, ref = ROPE_INIT_FUNCTIONS["longrope"](hf_config(96, params, 131072), "cpu")
    assert R.attention_factor(spec) == pytest.approx(ref, rel=1e-9)
    assert ref == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))


def test_ntk_by_parts_is_yarn_without_the_temperature():
    common = dict(factor=4.0, original_len=2048, beta_fast=32.0, beta_slow=1.0)
    parts, yarn = RopeSpec(variant="ntk-by-parts", **common), RopeSpec(variant="yarn", **common)
    assert torch.equal(R.inv_freq(parts, 128), R.inv_freq(yarn, 128))
    assert R.attention_factor(parts) == 1.0 and R.attention_factor(yarn) > 1.0


def test_abf_is_plain_rope_at_the_new_base_whatever_the_factor():
    abf = RopeSpec(variant="abf", base=10000.0, new_base=500000.0, factor=4.0, original_len=2048)
    plain = RopeSpec(base=500000.0)
    assert torch.equal(R.inv_freq(abf, 128), R.inv_freq(plain, 128))
    assert R.attention_factor(abf) == 1.0


def test_longrope_switches_factors_past_original_len_and_tables_share():
    spec = RopeSpec(variant="longrope", factor=4.0, original_len=64, **longrope_factors(16, 4.0, 1))
    short = R.inv_freq(spec, 16, 64)
    long = R.inv_freq(spec, 16, 65)
    assert torch.equal(short, R.inv_freq(spec, 16, None)) and torch.equal(short, R.inv_freq(spec, 16, 8))
    assert torch.equal(long, R.inv_freq(spec, 16, 10_000)) and not torch.equal(short, long)
    tables = R.RotaryTables(spec, 16)
    for length in (8, 64, 65, 300, 5000):
        tables.get(0, 4, "cpu", length)
    assert sorted(key for _, key in tables._tables) == [64, 65]  # two frequency sets, two tables


# --- bad input ---


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"variant": "abf"}, "new_base: required for variant 'abf'"),
        ({"variant": "abf", "base": 1e5, "new_base": 1e4}, "new_base: must be above base"),
        ({"variant": "yarn", "factor": 2.0, "new_base": 1e6}, "new_base: only variant 'abf' uses it"),
        ({"variant": "longrope", "factor": 2.0}, "short_factor: required for variant 'longrope'"),
        (
            {"variant": "longrope", "short_factor": [1.0, 1.0], "long_factor": [2.0]},
            "long_factor: must have as many numbers as short_factor",
        ),
        (
            {"variant": "longrope", "short_factor": [1.0, 0.0], "long_factor": [2.0, 2.0]},
            "short_factor: every factor must be > 0",
        ),
        ({"variant": "pi", "factor": 2.0, "long_factor": [1.0]}, "short_factor: only variant 'longrope'"),
        (
            {"variant": "ntk-by-parts", "factor": 2.0, "attention_factor": 1.2},
            "attention_factor: ntk-by-parts",
        ),
        ({"variant": "rope", "layers": "local"}, "layers"),
    ],
)
def test_bad_spec_names_the_parameter(fields, message):
    with pytest.raises(ValidationError, match=message):
        RopeSpec(**fields)
    with pytest.raises(SpecError) as err:
        build_rope_spec(**fields)
    assert "\n" not in err.value.message


def test_abf_new_base_must_exceed_the_checkpoint_base():
    spec = RopeSpec(variant="abf", new_base=50000.0)
    assert spec.with_base(10000.0).base == 10000.0
    with pytest.raises(SpecError, match=r"new_base: must be above the checkpoint's rotary base 100000"):
        spec.with_base(100000.0)


def test_longrope_factor_count_must_fit_the_head_dim():
    spec = RopeSpec(
        variant="longrope", factor=2.0, original_len=64, short_factor=[1.0] * 3, long_factor=[2.0] * 3
    )
    with pytest.raises(
        SpecError, match=r"^short_factor: needs head_dim / 2 = 8 numbers, one per frequency \(got 3\)"
    ):
        R.inv_freq(spec, 16)


@pytest.mark.parametrize("where", ["top", "rope_scaling", "rope_parameters"])
def test_longrope_factors_from_a_json_file(tmp_path, where):
    factors = longrope_factors(16, 4.0, 3)
    body = factors if where == "top" else {"model_type": "phi3", where: {"type": "longrope", **factors}}
    path = tmp_path / "factors.json"
    path.write_text(json.dumps(body))
    spec = RopeSpec(variant="longrope", factor=4.0, factors_file=path)
    assert spec.short_factor == factors["short_factor"] and spec.long_factor == factors["long_factor"]
    assert spec.factors_file is None  # the numbers travel with the runs, not the path
    assert RopeSpec.model_validate(spec.model_dump()) == spec


def test_longrope_factors_file_errors(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(SpecError, match=r"factors_file: cannot read .*nope.json"):
        build_rope_spec(variant="longrope", factors_file=missing)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rope_scaling": {"short_factor": [1.0]}}))
    with pytest.raises(
        SpecError, match=r"factors_file: .*bad.json has no short_factor and long_factor lists"
    ):
        build_rope_spec(variant="longrope", factors_file=bad)
    with pytest.raises(SpecError, match="factors_file: give the factors inline or as a file, not both"):
        build_rope_spec(variant="longrope", factors_file=bad, short_factor=[1.0], long_factor=[1.0])


def test_builtin_set_leaves_out_variants_that_need_parameters():
    assert set(default_variant_specs()) == {
        "rope",
        "pi",
        "ntk",
        "dynamic-ntk",
        "yarn",
        "llama3",
        "ntk-by-parts",
    }


# --- inside the model ---

TINY = dict(sequence_len=16, vocab_size=100, n_layer=2, n_head=4, n_kv_head=2, n_embd=32)
TINY_2026 = dict(TINY, n_layer=4, architecture="nanochat-2026", window_pattern="SSSL")
NEW_SPECS = {
    "abf": RopeSpec(variant="abf", new_base=800000.0, factor=4.0),
    "ntk-by-parts": RopeSpec(variant="ntk-by-parts", factor=4.0, beta_fast=4.0, beta_slow=1.0),
    "longrope": RopeSpec(variant="longrope", factor=4.0, **longrope_factors(8, 4.0, 0)),
}


def random_model(config: dict, rope: RopeSpec | None, seed: int = 0) -> GPT:
    return noisy_gpt(seed, 0.3, rope, **config).eval()


@pytest.mark.parametrize("variant", list(NEW_SPECS))
@pytest.mark.parametrize("config", [TINY, TINY_2026], ids=["2025", "2026"])
def test_kv_cache_decoding_equals_full_forward(variant, config):
    """Past L0 = 16: a planned cache decodes with the frequencies of one full forward (longrope: long factors)."""
    model = random_model(config, NEW_SPECS[variant])
    idx = torch.randint(0, 100, (2, 40))
    with torch.no_grad():
        full = model(idx)
        cache = KVCache(2, 2, model.config.head_dim, config["n_layer"], "cpu", torch.float32, seq_len=40)
        pieces = [model(idx[:, :6], kv_cache=cache)] + [
            model(idx[:, t : t + 1], kv_cache=cache) for t in range(6, 40)
        ]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", list(NEW_SPECS))
def test_variants_change_the_model_and_longrope_within_l0_uses_short_factors(variant):
    base, scaled = random_model(TINY, None), random_model(TINY, NEW_SPECS[variant])
    idx = torch.randint(0, 100, (1, 16))
    with torch.no_grad():
        assert not torch.allclose(base(idx), scaled(idx))
        if variant == "longrope":
            within = random_model(TINY, NEW_SPECS[variant].model_copy(update={"long_factor": [9.0] * 4}))
            torch.testing.assert_close(within(idx), scaled(idx), rtol=0, atol=0)  # T = L0: short factors only


def hf_layer_reference(spec: RopeSpec, model: GPT) -> dict[str, tuple[torch.Tensor, float]]:
    """Per layer type, (inv_freq, attention factor) from transformers' nested `rope_parameters`."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: PLC0415 - optional dependency (transformers)
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: PLC0415 - optional dependency (transformers)

    head_dim = model.config.head_dim
    plain = {"rope_type": "default", "rope_theta": spec.base}
    config = hf_config(
        head_dim, {"full_attention": hf_yarn(spec), "sliding_attention": plain}, 4 * spec.original_len
    )
    config.layer_types = ["full_attention" if g else "sliding_attention" for g in model.global_layers()]
    flat = hf_config(head_dim, plain, spec.original_len)
    return {
        "full_attention": ROPE_INIT_FUNCTIONS["yarn"](config, "cpu", layer_type="full_attention"),
        "sliding_attention": LlamaRotaryEmbedding.compute_default_rope_parameters(flat),
    }


@pytest.mark.parametrize("layers", ["all", "global"])
def test_layers_global_scales_only_the_full_context_layers_as_transformers(layers):
    spec = RopeSpec(variant="yarn", factor=4.0, beta_fast=4.0, beta_slow=1.0, layers=layers)
    model = random_model(TINY_2026, spec)
    assert model.global_layers() == [False, False, False, True]  # SSSL
    reference = hf_layer_reference(model.rope, model)
    positions = torch.arange(40, dtype=torch.float64)
    rotations = model._rotations(0, 40, "cpu", 40)
    for i, (cos, _) in enumerate(rotations):
        kind = "full_attention" if (layers == "all" or model.global_layers()[i]) else "sliding_attention"
        ref_freq, ref_factor = reference[kind]
        expected = torch.outer(positions, ref_freq.double()).cos().float()
        torch.testing.assert_close(cos[0, :, 0], expected, atol=2e-5, rtol=0)
        assert model._softmax_scales[i] == pytest.approx(ref_factor**2 / math.sqrt(model.config.head_dim))


def test_layers_global_has_no_effect_without_windows():
    spec = RopeSpec(variant="yarn", factor=4.0, beta_fast=4.0, beta_slow=1.0)
    idx = torch.randint(0, 100, (1, 40))
    with torch.no_grad():
        every = random_model(TINY, spec)(idx)
        global_only = random_model(TINY, spec.model_copy(update={"layers": "global"}))(idx)
    assert torch.equal(every, global_only)


def test_layers_global_differs_from_all_on_a_windowed_model_and_keeps_plain_local_layers():
    spec = RopeSpec(variant="pi", factor=4.0, layers="global")
    idx = torch.randint(0, 100, (1, 40))
    with torch.no_grad():
        global_only = random_model(TINY_2026, spec)(idx)
        every = random_model(TINY_2026, spec.model_copy(update={"layers": "all"}))(idx)
    assert not torch.allclose(global_only, every)
    model = random_model(TINY_2026, RopeSpec(variant="abf", new_base=500000.0, layers="global"))
    cos_local, cos_global = model._rotations(0, 8, "cpu", 8)[0][0], model._rotations(0, 8, "cpu", 8)[-1][0]
    plain = R.inv_freq(RopeSpec(base=100000.0), 8)  # the checkpoint's base on the short-window layers
    torch.testing.assert_close(cos_local[0, 3, 0], (3 * plain.double()).cos().float())
    assert not torch.allclose(cos_local, cos_global)


def test_variants_flag_says_what_abf_and_longrope_need(tmp_path):

    with pytest.raises(SpecError, match=r"^Variant 'abf' needs new_base \(the raised rotary base") as err:
        load_spec(None, variants="pi,ABF", base_dir=tmp_path)
    assert "variants:" in err.value.hint
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "variants:\n  abf: {variant: abf, new_base: 500000}\n  lr: {variant: longrope, short_factor: [1, 1], long_factor: [2, 4]}\n"
    )
    spec = load_spec(spec_file, variants="abf,lr", base_dir=tmp_path)
    assert spec.variants["abf"].new_base == 500000 and spec.variants["lr"].long_factor == [2.0, 4.0]
