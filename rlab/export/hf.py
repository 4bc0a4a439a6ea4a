"""`rlab export --format hf`: one checkpoint as a folder `transformers.AutoModelForCausalLM.from_pretrained` loads.

The folder holds `config.json` (with `rope_parameters` and `rope_theta` in transformers' vocabulary,
`rlab.export.hf_rope`), `model.safetensors` (float32, nanochat's keys renamed, `rlab.export.hf_weights`), the
tokenizer (`rlab.export.hf_tokenizer`), `generation_config.json` and a README card (`rlab.export.card`).

Which model class: nanochat-2025 with a RoPE transformers applies as rlab does goes through transformers' own
`NanoChatForCausalLM`. Everything else ships `modeling_rlab_nanochat.py` (trust_remote_code): nanochat-2026's
parts have no transformers model, and an attention temperature (yarn, longrope) would be erased in transformers'
NanoChat, which multiplies cos/sin by it before the QK-norm.

The export checks itself before it is put in place: the folder is loaded back (offline) and its logits on a
fixed batch are compared with rlab's; the largest |difference| must stay below `ROUNDTRIP_TOLERANCE`, or
nothing is written. The batch runs past L0 where the model's length allows, so length-dependent RoPEs
(dynamic, longrope) are checked on their extended frequencies.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.errors import ExportError

if TYPE_CHECKING:
    from rlab.core.checkpoint_meta import CheckpointMeta

ROUNDTRIP_TOLERANCE = 1e-3
"""Largest |logit difference| (logits soft-capped at 15, float32) allowed between rlab and the exported model.
transformers' own NanoChat forms rotary angles in float32 (position x inv_freq), rlab in float64; that and the
order of float32 sums are the differences (measured: <= 2e-5 on the test models, see tests/export)."""
ROUNDTRIP_ROWS = 2
ROUNDTRIP_MIN_LEN = 128
ROUNDTRIP_PAST_L0 = 64
"""The check batch: 2 rows of min(sequence_len, max(128, L0 + 64)) tokens, BOS first, seeded."""
MODELING_FILE = "modeling_rlab_nanochat.py"
REMOTE_CLASSES = {
    "AutoConfig": "modeling_rlab_nanochat.RlabNanoChatConfig",
    "AutoModelForCausalLM": "modeling_rlab_nanochat.RlabNanoChatForCausalLM",
}


@dataclass(frozen=True)
class RoundTrip:
    """The export's own check: rlab's logits vs the loaded folder's on one fixed batch."""

    max_abs_logit_diff: float
    rows: int
    length: int
    original_len: int
    tolerance: float
    argmax_agreement: float
    tokenizer_texts: int

    def describe(self) -> str:
        return (
            f"max |logit difference| {self.max_abs_logit_diff:.2e} over {self.rows}x{self.length} tokens "
            f"(L0 {self.original_len}; tolerance {self.tolerance:g}); argmax agrees at "
            f"{self.argmax_agreement:.1%} of positions; tokenizer: {self.tokenizer_texts} check texts encode "
            "identically"
        )


@dataclass(frozen=True)
class ExportResult:
    out: Path
    tag: str
    step: int
    architecture: str
    model_class: str
    remote_code: bool
    rope: str
    rope_parameters: dict[str, Any]
    roundtrip: RoundTrip
    files: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "out": str(self.out)}


def export_hf(
    base_dir: Path,
    tag: str,
    out: Path,
    *,
    step: int | None = None,
    results_root: Path | None = None,
    force: bool = False,
) -> ExportResult:
    """Export `tag`@`step` (newest when None) of `base_dir` into `out`, checked round trip."""
    import torch

    from rlab.core.checkpoint import find_last_step, load_model
    from rlab.core.tokenizer import Tokenizer
    from rlab.export.hf_tokenizer import save_hf_tokenizer
    from rlab.paths import BaseLayout

    _require_transformers()
    layout = BaseLayout(base_dir)
    ckpt_dir = layout.checkpoint_dir(tag)
    step = step if step is not None else find_last_step(ckpt_dir)
    if step is None:
        raise ExportError(
            f"No complete checkpoint of tag '{tag}' in {ckpt_dir}.", "`rlab ls` lists the tags."
        )
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise ExportError(
            f"{out} exists and is not empty.", "Choose another --out, or replace it with --force."
        )
    model, meta = load_model(ckpt_dir, step)
    model = model.float().eval()
    tokenizer = Tokenizer.from_directory(layout.tokenizer_dir)
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ExportError(
            f"The tokenizer in {layout.tokenizer_dir} has {tokenizer.vocab_size} tokens but {tag} was trained with "
            f"{model.config.vocab_size}.",
            "Export from the base dir the tag was trained in.",
        )
    remote = needs_remote_code(model)
    staging = out.parent / f".{out.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        rope_parameters = _write_model(model, tokenizer, staging, remote)
        save_hf_tokenizer(tokenizer, staging)
        with torch.no_grad(), _quiet_transformers():
            roundtrip = check_roundtrip(model, tokenizer, staging, remote)
        _write_card(model, meta, layout, tag, step, staging, remote, rope_parameters, roundtrip, results_root)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ExportResult(
        out=out,
        tag=tag,
        step=step,
        architecture=model.config.architecture,
        model_class=_class_name(remote),
        remote_code=remote,
        rope=model.rope.describe(),
        rope_parameters=rope_parameters,
        roundtrip=roundtrip,
        files=sorted(p.name for p in out.iterdir()),
    )


def _require_transformers() -> None:
    try:
        import safetensors  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise ExportError(
            "Exporting to Hugging Face needs transformers and safetensors.",
            'Install them: pip install "rlab[hf]".',
        ) from None


def needs_remote_code(model: Any) -> bool:
    """Whether the folder must ship its own modeling file: anything transformers' NanoChat does not compute as
    rlab does (nanochat-2026's parts, an attention temperature, a RoPE per layer type)."""
    import transformers

    from rlab.core.rope import attention_factor

    if not hasattr(transformers, "NanoChatForCausalLM"):
        return True
    two_rope = any(not model.rope.scales_layer(g) for g in model.global_layers())
    return model.config.architecture != "nanochat-2025" or attention_factor(model.rope) != 1.0 or two_rope


def _class_name(remote: bool) -> str:
    return "RlabNanoChatForCausalLM" if remote else "NanoChatForCausalLM"


def hf_config(model: Any, bos_id: int, remote: bool) -> Any:
    """The transformers config of `model` (a `NanoChatConfig`, or the shipped `RlabNanoChatConfig`)."""
    import torch

    from rlab.export.hf_rope import hf_layer_rope, hf_max_positions

    c, rope = model.config, model.rope
    layer_types = ["full_attention" if g else "sliding_attention" for g in model.global_layers()]
    common = dict(
        vocab_size=c.vocab_size,
        hidden_size=c.n_embd,
        intermediate_size=4 * c.n_embd,
        num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head,
        num_key_value_heads=c.n_kv_head,
        max_position_embeddings=hf_max_positions(rope, c.sequence_len),
        rope_parameters=hf_layer_rope(rope, c.head_dim, layer_types),
        rms_norm_eps=torch.finfo(torch.float32).eps,  # rlab's RMSNorm passes no eps: torch takes this one
        final_logit_softcapping=15.0,
        tie_word_embeddings=False,
        bos_token_id=bos_id,
        eos_token_id=bos_id,  # a base model's document ends where the next <|bos|> starts
        pad_token_id=None,
        architectures=[_class_name(remote)],
        dtype="float32",
    )
    if not remote:
        from transformers import NanoChatConfig

        return NanoChatConfig(hidden_act="relu2", **common)
    from rlab.export.modeling_rlab_nanochat import RlabNanoChatConfig

    arch = model.arch
    config = RlabNanoChatConfig(
        layer_types=layer_types,
        window_sizes=list(model.window_sizes),
        value_embed_layers=sorted(int(i) for i in (model.value_embeds or {})),
        residual_scalars=arch.residual_scalars,
        smear=arch.smear,
        backout_layer=model.backout_layer,
        qk_scale=arch.qk_scale,
        use_cache=False,
        **common,
    )
    config.auto_map = dict(REMOTE_CLASSES)
    return config


def _write_model(model: Any, tokenizer: Any, out: Path, remote: bool) -> dict[str, Any]:
    from safetensors.torch import save_file
    from transformers import GenerationConfig

    from rlab.export.hf_weights import hf_state_dict

    config = hf_config(model, tokenizer.bos_token_id, remote)
    config.save_pretrained(str(out))
    if remote:
        shutil.copyfile(Path(__file__).with_name(MODELING_FILE), out / MODELING_FILE)
    generation = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.bos_token_id, use_cache=not remote
    )
    generation.save_pretrained(str(out))
    save_file(
        hf_state_dict(model.state_dict(), model.config.vocab_size),
        str(out / "model.safetensors"),
        {"format": "pt"},
    )
    return json.loads((out / "config.json").read_text())["rope_parameters"]


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' loading progress bars off while the export loads its own folder back."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def roundtrip_batch(model: Any, bos_id: int, seed: int = 0) -> Any:
    """(rows, length) token ids: BOS, then seeded tokens of the real vocabulary."""
    import torch

    c = model.config
    length = min(c.sequence_len, max(ROUNDTRIP_MIN_LEN, int(model.rope.original_len) + ROUNDTRIP_PAST_L0))
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, c.vocab_size, (ROUNDTRIP_ROWS, length), generator=generator)
    ids[:, 0] = bos_id
    return ids


def load_exported(folder: Path, remote: bool) -> Any:
    """The folder as transformers loads it (offline, float32); `ExportError` on keys it does not take."""
    import torch
    from transformers import AutoModelForCausalLM

    loaded: Any
    info: dict[str, Any]
    loaded, info = AutoModelForCausalLM.from_pretrained(  # type: ignore[misc]
        str(folder),
        trust_remote_code=remote,
        local_files_only=True,
        dtype=torch.float32,
        output_loading_info=True,
    )
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        raise ExportError(f"transformers loads the exported weights with {bad}.")
    return loaded.eval()


def check_roundtrip(model: Any, tokenizer: Any, folder: Path, remote: bool) -> RoundTrip:
    """Load `folder` back (tokenizer and model) and compare its logits with rlab's on `roundtrip_batch`;
    `ExportError` past tolerance."""
    from transformers import AutoTokenizer

    from rlab.export.hf_tokenizer import check_tokenizer

    hf_tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=remote)
    tokenizer_texts = check_tokenizer(tokenizer, hf_tok)  # type: ignore[arg-type]
    ids = roundtrip_batch(model, int(hf_tok.bos_token_id))
    ours = model(ids)  # (B, T, V) fp32, soft-capped
    theirs = load_exported(folder, remote)(input_ids=ids).logits.float()  # (B, T, V)
    if theirs.shape != ours.shape:
        raise ExportError(
            f"Round trip: transformers gives logits {tuple(theirs.shape)}, rlab {tuple(ours.shape)}."
        )
    diff = float((theirs - ours).abs().max())
    agree = float((theirs.argmax(-1) == ours.argmax(-1)).float().mean())
    result = RoundTrip(
        max_abs_logit_diff=diff,
        rows=ids.size(0),
        length=ids.size(1),
        original_len=int(model.rope.original_len),
        tolerance=ROUNDTRIP_TOLERANCE,
        argmax_agreement=agree,
        tokenizer_texts=tokenizer_texts,
    )
    if not diff <= ROUNDTRIP_TOLERANCE:  # also catches NaN
        raise ExportError(
            f"Round trip failed: {result.describe()}.",
            "Nothing was written. This is a bug in the export of this configuration; please report it.",
        )
    return result


def _write_card(
    model: Any,
    meta: CheckpointMeta,
    layout: Any,
    tag: str,
    step: int,
    out: Path,
    remote: bool,
    rope_parameters: dict[str, Any],
    roundtrip: RoundTrip,
    results_root: Path | None,
) -> None:
    from rlab.core.rope import FORMULAS
    from rlab.export.card import lineage, render_card, result_lines

    doc, where = _eval_doc(meta, tag, results_root)
    notes = []
    if remote:
        notes.append(
            "The shipped modeling file has no KV cache (the smear gate reads the previous token): `generate` "
            "recomputes the sequence each step."
        )
    if model.rope.variant.value == "dynamic-ntk":
        notes.append(
            "transformers' `dynamic` keeps the frequencies of the longest sequence seen for later shorter ones above "
            "L0 (max_position_embeddings holds L0); rlab evaluates them at each forward's own length."
        )
    if model.arch.sliding_windows:
        notes.append(f"Attention windows per layer (tokens back a query sees): {list(model.window_sizes)}.")
    card = render_card(
        title=f"{tag} (step {step})",
        architecture=model.config.architecture,
        model_class=_class_name(remote),
        remote_code=remote,
        rope_text=f"`{model.rope.describe()}`: {FORMULAS[model.rope.variant]}",
        rope_parameters=rope_parameters,
        chain=lineage(layout.checkpoints_root, tag, step, meta),
        results=list(result_lines(doc, where)),
        roundtrip=f"`rlab export` loaded this folder back and compared logits with rlab's: {roundtrip.describe()}.",
        notes=notes,
    )
    (out / "README.md").write_text(card)


def _eval_doc(meta: CheckpointMeta, tag: str, results_root: Path | None) -> tuple[Any, Path | None]:
    """The tag's eval.json (its experiment's, under the results root), or (None, where it was looked for)."""
    from rlab.errors import RlabError
    from rlab.paths import ExperimentLayout, default_results_root
    from rlab.records.eval_doc import read_eval_doc

    experiment = meta.experiment_name
    if not experiment:
        return None, None
    path = ExperimentLayout(results_root or default_results_root(), str(experiment)).eval_json(tag)
    if not path.is_file():
        return None, path
    try:
        return read_eval_doc(path), path
    except RlabError:
        return None, path
