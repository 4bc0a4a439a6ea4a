"""`rlab export --format hf`: both nanochat generations, every variant, loaded by transformers offline.

Tiny random models are written in rlab's checkpoint layout (tests/core/tiny_checkpoints.py) next to a real
tokenizer; each export is loaded back with `AutoModelForCausalLM.from_pretrained(DIR)` (trust_remote_code where
the folder ships its modeling file) and its logits are compared with rlab's on a batch the export's own check
did not use (longer, past L0).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from rlab.core.checkpoint import load_model
from rlab.core.rope import attention_factor
from rlab.core.tokenizer import Tokenizer
from rlab.errors import ExportError
from rlab.export import hf as H
from rlab.export import hf_check as C
from rlab.export.hf_rope import HF_ROPE
from rlab.paths import BaseLayout
from rlab.spec.rope import RopeSpec, RopeVariant
from tests.cli.harness import assert_clean_error, run_main
from tests.conftest import NANOCHAT_REFERENCE_SKIP, nanochat_reference_path
from tests.core.tiny_checkpoints import random_model, write_checkpoint

torch.set_num_threads(1)

L0 = 16  # the variants extend the tiny models' L0 = 16 to their sequence_len 64
FACTORS = {"short_factor": [1.0 + i / 40 for i in range(8)], "long_factor": [1.0 + i / 2 for i in range(8)]}
VARIANTS = {
    "rope": RopeSpec(),
    "pi": RopeSpec(variant="pi", factor=4.0, original_len=L0),
    "ntk": RopeSpec(variant="ntk", factor=4.0, original_len=L0),
    "dynamic-ntk": RopeSpec(variant="dynamic-ntk", factor=4.0, original_len=L0),
    "yarn": RopeSpec(variant="yarn", factor=4.0, original_len=L0, beta_fast=4.0),
    "llama3": RopeSpec(
        variant="llama3", factor=4.0, original_len=L0, low_freq_factor=1.0, high_freq_factor=4.0
    ),
    "abf": RopeSpec(variant="abf", new_base=2_000_000.0, original_len=L0),
    "ntk-by-parts": RopeSpec(variant="ntk-by-parts", factor=4.0, original_len=L0, beta_fast=4.0),
    "longrope": RopeSpec(variant="longrope", factor=4.0, original_len=L0, **FACTORS),
}
FAST = {
    ("nanochat-2025", "rope"),
    ("nanochat-2025", "yarn"),
    ("nanochat-2026", "longrope"),
    ("nanochat-2026", "ntk"),
}


def vocab(base: Path) -> int:
    return Tokenizer.from_directory(BaseLayout(base).tokenizer_dir).vocab_size


def load_folder(folder: Path):
    from transformers import AutoModelForCausalLM  # noqa: PLC0415 - optional dependency (transformers)

    config = json.loads((folder / "config.json").read_text())
    remote = "auto_map" in config
    if not remote:  # transformers' own class: no custom code needed at all
        return AutoModelForCausalLM.from_pretrained(folder).eval(), config
    return AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval(), config


def cases():
    for arch in ("nanochat-2025", "nanochat-2026"):
        for name in VARIANTS:
            marks = [] if (arch, name) in FAST else [pytest.mark.slow]
            yield pytest.param(arch, name, marks=marks, id=f"{arch}-{name}")
    yield pytest.param(
        "nanochat-2026", "yarn-global", id="nanochat-2026-yarn-global", marks=[]
    )  # layers: global -> per-layer-type rope_parameters


@pytest.mark.parametrize(("arch", "name"), list(cases()))
def test_export_loads_offline_and_matches_rlab(base, tmp_path, arch, name):
    rope = VARIANTS[name.removesuffix("-global")]
    if name.endswith("-global"):
        rope = rope.model_copy(update={"layers": "global"})
    write_checkpoint(base, "t", random_model(arch, rope, vocab_size=vocab(base)))
    result = H.export_hf(base, "t", tmp_path / "out")
    assert result.roundtrip.max_abs_logit_diff <= C.ROUNDTRIP_TOLERANCE
    assert result.roundtrip.length == 64 and result.roundtrip.argmax_agreement == 1.0
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= set(result.files)

    model, _ = load_model(BaseLayout(base).checkpoint_dir("t"), 10)
    hf_model, config = load_folder(tmp_path / "out")
    remote = H.needs_remote_code(model)
    assert (
        ("auto_map" in config)
        == remote
        == (arch == "nanochat-2026" or attention_factor(model.rope) != 1.0 or name == "dynamic-ntk")
    )
    assert config["model_type"] == ("rlab_nanochat" if remote else "nanochat")
    params = config["rope_parameters"]
    flat = params.get("full_attention", params)
    assert isinstance(flat["rope_theta"], float)  # every export carries rope_theta
    if name.endswith("-global"):
        assert params["sliding_attention"] == {"rope_type": "default", "rope_theta": 100000.0}
    ids = torch.randint(0, model.config.vocab_size, (3, 57), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        diff = (hf_model(input_ids=ids).logits - model(ids)).abs().max().item()
    assert diff <= C.ROUNDTRIP_TOLERANCE, f"{arch} {name}: {diff:.2e}"


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("ntk", {"rope_type": "default", "rope_theta": 10000.0 * 4.0 ** (16 / 14)}),
        ("abf", {"rope_type": "default", "rope_theta": 2_000_000.0}),
        ("pi", {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}),
    ],
)
def test_static_variants_export_as_transformers_says_them(base, tmp_path, variant, expected):
    """Static NTK is not a transformers rope type: it is plain rope at a changed rope_theta."""
    write_checkpoint(base, "t", random_model("nanochat-2025", VARIANTS[variant], vocab_size=vocab(base)))
    H.export_hf(base, "t", tmp_path / "out")
    params = json.loads((tmp_path / "out" / "config.json").read_text())["rope_parameters"]
    assert params.keys() == expected.keys() and params["rope_type"] == expected["rope_type"]
    assert all(params[k] == pytest.approx(v) for k, v in expected.items() if k != "rope_type")


def test_a_variant_transformers_cannot_express_is_refused_and_nothing_written(base, tmp_path, monkeypatch):
    write_checkpoint(base, "t", random_model("nanochat-2025", VARIANTS["llama3"], vocab_size=vocab(base)))
    monkeypatch.delitem(HF_ROPE, RopeVariant.llama3)
    with pytest.raises(
        ExportError, match=r"RoPE variant 'llama3' has no counterpart in transformers' rope types"
    ):
        H.export_hf(base, "t", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_a_failed_round_trip_writes_nothing(base, tmp_path, monkeypatch):
    write_checkpoint(base, "t", random_model("nanochat-2026", VARIANTS["yarn"], vocab_size=vocab(base)))
    monkeypatch.setattr(C, "ROUNDTRIP_TOLERANCE", 0.0)
    with pytest.raises(ExportError, match=r"^Round trip failed: max \|logit difference\| "):
        H.export_hf(base, "t", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_an_existing_folder_needs_force(base, tmp_path):
    write_checkpoint(base, "t", random_model("nanochat-2025", vocab_size=vocab(base)))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="exists and is not empty"):
        H.export_hf(base, "t", tmp_path / "out")
    H.export_hf(base, "t", tmp_path / "out", force=True)
    assert not (tmp_path / "out" / "keep.txt").exists()


@pytest.mark.parametrize("arch", ["nanochat-2025", "nanochat-2026"])
@pytest.mark.parametrize("name", ["yarn", "dynamic-ntk"])
def test_generate_with_cache_left_padded_equals_rlab_greedy(base, tmp_path, arch, name):
    """transformers' generate (greedy, KV cache, a left-padded batch) follows rlab's greedy sampler token for
    token, past L0 (dynamic: at the planned length), on prompts the export's own check did not use."""
    write_checkpoint(base, "t", random_model(arch, VARIANTS[name], vocab_size=vocab(base)))
    result = H.export_hf(base, "t", tmp_path / "out")
    assert result.roundtrip.generate_match and result.roundtrip.generate_prompt_lens == (56, 28, 5)
    hf_model, config = load_folder(tmp_path / "out")
    assert config["use_cache"] is True
    model, _ = load_model(BaseLayout(base).checkpoint_dir("t"), 10)
    bos = int(hf_model.config.bos_token_id)
    g = torch.Generator().manual_seed(3)
    prompts = [
        [bos, *torch.randint(0, model.config.vocab_size, (n,), generator=g).tolist()] for n in (40, 3, 17)
    ]
    with torch.no_grad():
        assert C.greedy_hf(hf_model, prompts, bos) == C.greedy_rlab(model, prompts, bos)


def test_dynamic_ntk_generation_needs_the_planned_length(base, tmp_path, monkeypatch):
    """Negative control: decoding with frequencies at each step's length (what transformers' own `dynamic` does)
    scores other logits than one forward over the planned length; the length `generate` plans removes that."""
    from transformers import GenerationMixin  # noqa: PLC0415 - optional dependency (transformers)

    write_checkpoint(
        base, "t", random_model("nanochat-2026", VARIANTS["dynamic-ntk"], vocab_size=vocab(base))
    )
    H.export_hf(base, "t", tmp_path / "out")
    hf_model, _ = load_folder(tmp_path / "out")
    model, _ = load_model(BaseLayout(base).checkpoint_dir("t"), 10)
    ids = torch.randint(1, model.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(3))

    def step_logits():  # the logits each decoding step scored, (new tokens, V)
        out = hf_model.generate(
            ids, max_new_tokens=8, do_sample=False, output_logits=True, return_dict_in_generate=True
        )
        return torch.cat(out.logits), out.sequences

    with torch.no_grad():
        planned, sequence = step_logits()
        full = model(sequence)[0, ids.size(1) - 1 : -1]  # one forward over prompt + new tokens
        assert (planned - full).abs().max() <= C.ROUNDTRIP_TOLERANCE
        monkeypatch.setattr(
            type(hf_model), "_prepare_cache_for_generation", GenerationMixin._prepare_cache_for_generation
        )
        assert (step_logits()[0] - full).abs().max() > 100 * C.ROUNDTRIP_TOLERANCE


def test_tokenizer_loads_with_auto_tokenizer_and_prepends_bos(base, tmp_path):
    from transformers import AutoTokenizer  # noqa: PLC0415 - optional dependency (transformers)

    write_checkpoint(base, "t", random_model("nanochat-2025", vocab_size=vocab(base)))
    H.export_hf(base, "t", tmp_path / "out")
    ours = Tokenizer.from_directory(BaseLayout(base).tokenizer_dir)
    theirs = AutoTokenizer.from_pretrained(tmp_path / "out")
    text = "The old king crossed the river in 1642, and nobody answered."
    assert theirs(text)["input_ids"] == [ours.bos_token_id, *ours.encode(text)]
    assert theirs.decode(theirs(text, add_special_tokens=False)["input_ids"]) == text


def test_card_lists_lineage_and_results(base, tmp_path):
    parent = random_model("nanochat-2025", vocab_size=vocab(base))
    write_checkpoint(base, "fx", parent, step=5, extra_meta={"tokens_trained": 1000})
    child = random_model("nanochat-2025", VARIANTS["yarn"], vocab_size=vocab(base))
    extra = {"lineage": {"parent_tag": "fx", "parent_step": 5}, "experiment": "fx", "tokens_trained": 3000}
    write_checkpoint(base, "fx-yarn", child, step=10, extra_meta=extra)
    results = tmp_path / "results"
    fixture = Path(__file__).parents[1] / "report" / "fixtures" / "fx" / "evals" / "fx-yarn" / "eval.json"
    (results / "fx" / "evals" / "fx-yarn").mkdir(parents=True)
    shutil.copyfile(fixture, results / "fx" / "evals" / "fx-yarn" / "eval.json")
    H.export_hf(base, "fx-yarn", tmp_path / "out", results_root=results)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "| fx-yarn | 10 | yarn |" in card and "| fx | 5 |" in card
    assert "val BPB" in card and "passkey accuracy by length" in card
    assert "max |logit difference|" in card and "trust_remote_code=True" in card  # yarn's temperature


def test_cli_export_json_and_errors(base, tmp_path):

    write_checkpoint(base, "t", random_model("nanochat-2026", VARIANTS["abf"], vocab_size=vocab(base)))
    args = ["export", "--tag", "t", "--base-dir", str(base), "--out"]
    done = run_main(*args, str(tmp_path / "out"), "--json")
    assert done.code == 0, done.text
    got = json.loads(done.out)
    assert got["remote_code"] and got["rope_parameters"]["rope_theta"] == 2_000_000.0
    assert got["roundtrip"]["max_abs_logit_diff"] <= got["roundtrip"]["tolerance"]
    assert_clean_error(
        run_main(*args, str(tmp_path / "o2"), "--format", "gguf"), "Unknown export format 'gguf'"
    )
    assert_clean_error(run_main(*args, str(tmp_path / "out")), "exists and is not empty")
    assert_clean_error(run_main(*args, str(tmp_path / "o3"), "--tag", "nope"), "No complete checkpoint")


# --- checkpoints nanochat itself wrote ($RLAB_NANOCHAT_REFERENCE) ---

REFERENCE = {"d314e96": "nanochat-2025", "head": "nanochat-2026"}


@pytest.mark.parametrize("version", list(REFERENCE))
@pytest.mark.parametrize("variant", ["rope", "yarn", "dynamic-ntk"])
def test_nanochat_written_checkpoints_export(tmp_path, version, variant):
    """nanochat's own d2 of each generation, as it is (rope) and with yarn / dynamic-ntk applied zero-shot (a
    clone's meta): logits, and generate() with the cache (nanochat-2026's short windows bind past 129 tokens)."""

    source = nanochat_reference_path(version)
    if not source.exists():
        pytest.skip(NANOCHAT_REFERENCE_SKIP)
    base = tmp_path / "base"
    shutil.copytree(source / "tokenizer", BaseLayout(base).tokenizer_dir)
    model, meta = load_model(BaseLayout(source).checkpoint_dir("d2"), 20)
    if variant != "rope":
        model.set_rope(RopeSpec(variant=variant, factor=4.0, original_len=model.config.sequence_len // 4))
    write_checkpoint(base, "d2", model, step=20)
    result = H.export_hf(base, "d2", tmp_path / "out")
    assert result.architecture == REFERENCE[version]
    assert result.remote_code == (version == "head" or variant != "rope")
    assert result.roundtrip.max_abs_logit_diff <= C.ROUNDTRIP_TOLERANCE and result.roundtrip.generate_match
    hf_model, config = load_folder(tmp_path / "out")
    assert config["max_position_embeddings"] == model.config.sequence_len
    if version == "head":  # SSSL over 2 layers: layer 0 keeps a 128-token window
        assert config["layer_types"] == ["sliding_attention", "full_attention"]
        assert config["sliding_window"] == 129
    if variant == "dynamic-ntk":
        assert config["rope_parameters"]["original_max_position_embeddings"] == model.config.sequence_len // 4
    ids = torch.randint(0, model.config.vocab_size, (2, model.config.sequence_len))
    with torch.no_grad():
        assert (hf_model(input_ids=ids).logits - model(ids)).abs().max().item() <= C.ROUNDTRIP_TOLERANCE
