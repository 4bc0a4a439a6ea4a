"""RoPE geometry: the critical dimension (Liu et al. 2024), the base lower bound (Men et al. 2024), window growth,
and the preflight's warnings from them on real checkpoints of both nanochat generations."""

from __future__ import annotations

import math

import pytest

from rlab.core import rope_geometry as G
from rlab.orchestrate.preflight import preflight_continue
from rlab.spec.loading import load_spec
from rlab.spec.rope import RopeSpec
from tests.core.tiny_checkpoints import random_model, write_checkpoint


def test_critical_dimension_at_head_dim_128_base_1e5_and_l0_2048():
    """head dim 128, base 1e5, L0 2048: 33 of 64 pairs turn within L0; T_extra = 2pi * b^(d_extra/d)."""
    plain = G.plain_inv_freq(1e5, 128)
    assert G.critical_pairs(plain, 2048) == 33
    assert G.extrapolation_bound(plain, 2048) == pytest.approx(2 * math.pi * 1e5 ** (66 / 128))


@pytest.mark.parametrize("head_dim", [16, 64, 128])
@pytest.mark.parametrize("base", [500.0, 1e4, 1e5, 5e5])
@pytest.mark.parametrize("length", [64, 1000, 2048, 32768])
def test_critical_pairs_follow_liu_et_al_closed_form(head_dim, base, length):
    """d_extra / 2 = ceil((d/2) log_b(L / 2pi)), clipped to [0, d/2]."""
    expected = math.ceil(head_dim / 2 * math.log(length / (2 * math.pi)) / math.log(base))
    got = G.critical_pairs(G.plain_inv_freq(base, head_dim), length)
    assert got == min(max(expected, 0), head_dim // 2)


def test_men_et_al_fit_gives_the_published_bounds():
    assert G.men_fitted_base(8192) == pytest.approx(1.0e5, rel=0.01)
    assert G.men_fitted_base(16384) == pytest.approx(3.1e5, rel=0.01)
    assert G.men_fitted_base(32768) == pytest.approx(9.5e5, rel=0.01)


@pytest.mark.parametrize(("base", "length"), [(4.3e3, 1024), (1.6e4, 2048), (8.4e4, 8192)])
def test_discrimination_reach_reproduces_their_bound_points(base, length):
    """Men et al.'s bound points (head dim 128) keep B_m >= 0 to their length; 10% lower bases do not."""
    assert (G.discrimination_reach(G.plain_inv_freq(base, 128), length) or length) >= length
    reach = G.discrimination_reach(G.plain_inv_freq(base * 0.9, 128), length)
    assert reach is not None and reach < length


def test_discrimination_reach_is_where_the_cosine_sum_first_turns_negative():
    theta = G.plain_inv_freq(1e5, 128)
    reach = G.discrimination_reach(theta, 20000)
    assert reach is not None and reach < 8192  # not monotone: 1e5 > 8.4e4 falls short of 8K
    b = [sum(math.cos(m * t) for t in theta) for m in (reach, reach + 1)]
    assert b[0] >= 0 > b[1]
    assert G.discrimination_reach(theta, reach) is None


def test_pi_stretches_the_reach_by_its_factor():
    theta = G.plain_inv_freq(1e4, 64)
    plain = G.discrimination_reach(theta, 50000)
    stretched = G.discrimination_reach([t / 4 for t in theta], 50000)
    assert plain is not None and stretched is not None and 4 * plain <= stretched <= 4 * plain + 4


def spec(**fields) -> RopeSpec:
    return RopeSpec(original_len=2048, base=1e4, **fields)


def test_warnings_say_where_a_plan_falls_short_with_the_numbers():
    ntk = G.assess(spec(variant="ntk", factor=4.0), 128, 8192)
    (line,) = ntk.warnings()
    assert line.startswith(
        "ntk: rotary base 4.09e+04 is below 1.0e+05, Men et al. 2024's lower bound for 8192"
    )
    assert G.assess(spec(variant="abf", new_base=5e5), 128, 8192).warnings() == []
    (pi,) = G.assess(spec(variant="pi", factor=4.0), 128, 8192).warnings()
    assert "keep Men et al. 2024's token discrimination" in pi and "only up to m = 6824" in pi
    small_head = G.assess(spec(variant="rope"), 32, 8192)
    assert small_head.base_bound is None  # the fit is for head dim 128
    assert all("head dim 32" in w for w in small_head.warnings())


def test_short_windows_that_grow_are_named_and_fixed_ones_are_not():
    grows = G.assess(spec(variant="yarn", factor=4.0), 128, 8192, short_windows=(512, 2048), window_len=8192)
    assert any(
        "grows them from 512 to 2048 tokens (x4)" in w and "`windows: fixed`" in w for w in grows.warnings()
    )
    fixed = spec(variant="yarn", factor=4.0, windows="fixed")
    assert not any("windows" in w for w in G.assess(fixed, 128, 8192, short_windows=(512, 512)).warnings())


def test_plan_warnings_merge_lines_that_read_the_same():
    geometries = [
        G.assess(spec(variant=v, factor=4.0), 128, 8192, name=v, short_windows=(512, 2048), window_len=8192)
        for v in ("pi", "yarn")
    ]
    lines = G.plan_warnings(geometries)
    assert sum(line.startswith("pi, yarn: nanochat-2026's short windows") for line in lines) == 1


def test_as_json_and_summary():
    g = G.assess(RopeSpec(variant="yarn", factor=4.0, original_len=2048, base=1e5), 128, 8192)
    data = g.as_json()
    assert data["critical_pairs_l0"] == 33 and data["critical_dim_l0"] == 66 and data["pairs"] == 64
    assert data["base_lower_bound"] == pytest.approx(G.men_fitted_base(8192))
    assert "33 of 64 pairs of base 100000" in g.summary()[0]


# --- the preflight, on real checkpoints ---


def preflight_warnings(tmp_path, architecture: str, variants: str, **shape) -> list[str]:

    write_checkpoint(tmp_path / "base", "b", random_model(architecture, **shape))
    spec = load_spec(
        None, base_dir=tmp_path / "base", results_dir=tmp_path / "res", base_tag="b", from_step=10,
        variants=variants, nproc=1,
    )  # fmt: skip
    return preflight_continue(spec).warnings


def test_preflight_warns_that_nanochat_2026_windows_quadruple(tmp_path):
    # head dim 128 and L0 2048, as nanochat's own: S windows 512 -> 2048 at the default 4x target
    warnings = preflight_warnings(
        tmp_path, "nanochat-2026", "rope,yarn", sequence_len=2048, n_embd=128, n_head=1, n_kv_head=1
    )
    window = [w for w in warnings if "short windows follow sequence_len" in w]
    assert window == [
        "rope, yarn: nanochat-2026's short windows follow sequence_len: training at 8192 grows them from 512 to "
        "2048 tokens (x4), so the short-window layers attend at distances they never trained at; `windows: "
        "fixed` keeps them at 512."
    ]
    assert not any("Men et al" in w and w.startswith("rope") for w in warnings)  # base 1e5 >= 1.0e5 at 8K


def test_preflight_warns_about_a_base_below_the_bound_on_nanochat_2025(tmp_path):
    warnings = preflight_warnings(
        tmp_path, "nanochat-2025", "ntk", sequence_len=2048, n_embd=128, n_head=1, n_kv_head=1
    )
    assert any(w.startswith("ntk: rotary base 4.09e+04 is below 1.0e+05") for w in warnings)
    assert not any("windows" in w for w in warnings)
