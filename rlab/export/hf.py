"""`rlab export --format hf`: one checkpoint as a folder `transformers.AutoModelForCausalLM.from_pretrained` loads.

The folder holds `config.json` (with `rope_parameters` and `rope_theta` in transformers' vocabulary,
`rlab.export.hf_rope`), `model.safetensors` (float32, nanochat's keys renamed, `rlab.export.hf_weights`), the
tokenizer (`rlab.export.hf_tokenizer`), `generation_config.json` and a README card (`rlab.export.card`).

Which model class: nanochat-2025 with a RoPE transformers applies as rlab does goes through transformers' own
`NanoChatForCausalLM`. Everything else ships `modeling_rlab_nanochat.py` (trust_remote_code): nanochat-2026's
parts have no transformers model, and an attention temperature (yarn, longrope) would be erased in transformers'
NanoChat, which multiplies cos/sin by it before the QK-norm; length-dependent RoPEs (dynamic, longrope) would be
evaluated by transformers at each step's length with earlier keys left at older frequencies, where rlab (and
the shipped file) evaluates them at the planned length, so cached generation equals one full forward.

`max_position_embeddings` is the length the arm is meant to serve (`served_length`); L0 stays in
`rope_parameters`. The export checks itself before it is put in place (`rlab.export.hf_check`: logits and
greedy `generate()` against rlab's); nothing is written when the check fails. Files are written 0644.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.core.checkpoint import find_last_step, load_model
from rlab.core.rope import FORMULAS, LENGTH_DEPENDENT, attention_factor
from rlab.core.tokenizer import Tokenizer
from rlab.errors import ExportError
from rlab.export.arm_facts import ArmFacts, arm_facts
from rlab.export.card import CardModel, CardOptions, lineage, render_card
from rlab.export.hf_check import RoundTrip, check_roundtrip
from rlab.export.hf_rope import hf_layer_rope
from rlab.export.hf_tokenizer import save_hf_tokenizer
from rlab.export.hf_weights import hf_state_dict
from rlab.export.modeling_rlab_nanochat import RlabNanoChatConfig
from rlab.paths import BaseLayout

if TYPE_CHECKING:
    from rlab.core.checkpoint_meta import CheckpointMeta

FILE_MODE = 0o644

MODELING_FILE = "modeling_rlab_nanochat.py"
REMOTE_CLASSES = {
    "AutoConfig": "modeling_rlab_nanochat.RlabNanoChatConfig",
    "AutoModelForCausalLM": "modeling_rlab_nanochat.RlabNanoChatForCausalLM",
}


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
    max_position_embeddings: int
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
    card: CardOptions | None = None,
) -> ExportResult:
    """Export `tag`@`step` (newest when None) of `base_dir` into `out`, checked round trip."""
    import torch

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
    facts = arm_facts(meta.experiment_name, tag, results_root)
    max_positions = served_length(model, facts.target_len)
    staging = out.parent / f".{out.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        rope_parameters = _write_model(model, tokenizer, staging, remote, max_positions)
        save_hf_tokenizer(tokenizer, staging, max_positions)
        with torch.no_grad(), _quiet_transformers():
            roundtrip = check_roundtrip(model, tokenizer, staging, remote)
        _write_card(
            model,
            meta,
            layout,
            tag,
            step,
            staging,
            remote,
            rope_parameters,
            roundtrip,
            facts,
            max_positions,
            card or CardOptions(),
        )
        _set_modes(staging)
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
        max_position_embeddings=max_positions,
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
    rlab does (nanochat-2026's parts, an attention temperature, a RoPE per layer type, a length-dependent RoPE)."""
    import transformers

    if not hasattr(transformers, "NanoChatForCausalLM"):
        return True
    two_rope = any(not model.rope.scales_layer(g) for g in model.global_layers())
    return (
        model.config.architecture != "nanochat-2025"
        or attention_factor(model.rope) != 1.0
        or two_rope
        or model.rope.variant in LENGTH_DEPENDENT
    )


def _class_name(remote: bool) -> str:
    return "RlabNanoChatForCausalLM" if remote else "NanoChatForCausalLM"


def served_length(model: Any, target_len: int | None = None) -> int:
    """The length the arm is meant to serve: the longest of its sequence_len, its run's target length (a zero-shot
    arm keeps its base's sequence_len) and factor x L0 for a scaled RoPE (what the factor was chosen for)."""
    rope = model.rope
    scaled = int(round(rope.factor * rope.original_len)) if rope.factor > 1 and rope.original_len else 0
    return max(model.config.sequence_len, target_len or 0, scaled)


def hf_config(model: Any, bos_id: int, remote: bool, max_positions: int | None = None) -> Any:
    """The transformers config of `model` (a `NanoChatConfig`, or the shipped `RlabNanoChatConfig`)."""
    import torch

    c, rope = model.config, model.rope
    layer_types = ["full_attention" if g else "sliding_attention" for g in model.global_layers()]
    common = dict(
        vocab_size=c.vocab_size,
        hidden_size=c.n_embd,
        intermediate_size=4 * c.n_embd,
        num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head,
        num_key_value_heads=c.n_kv_head,
        max_position_embeddings=max_positions or served_length(model),
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

    arch = model.arch
    windows = [
        w for w, t in zip(model.window_sizes, layer_types) if t == "sliding_attention" and w is not None
    ]
    config = RlabNanoChatConfig(
        layer_types=layer_types,
        window_sizes=list(model.window_sizes),
        value_embed_layers=sorted(int(i) for i in (model.value_embeds or {})),
        residual_scalars=arch.residual_scalars,
        smear=arch.smear,
        backout_layer=model.backout_layer,
        qk_scale=arch.qk_scale,
        # transformers' sliding window counts the query itself; rlab's window is how far back it sees
        sliding_window=max(windows) + 1 if windows else None,
        use_cache=True,
        **common,
    )
    config.auto_map = dict(REMOTE_CLASSES)
    return config


def _write_model(model: Any, tokenizer: Any, out: Path, remote: bool, max_positions: int) -> dict[str, Any]:
    from safetensors.torch import save_file
    from transformers import GenerationConfig

    config = hf_config(model, tokenizer.bos_token_id, remote, max_positions)
    config.save_pretrained(str(out))
    if remote:
        shutil.copyfile(Path(__file__).with_name(MODELING_FILE), out / MODELING_FILE)
    generation = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.bos_token_id, use_cache=True
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
    """transformers' loading progress bars and warnings off while the export loads its own folder back (the
    check texts run past a tiny model's length; generate() notes its defaults)."""
    from transformers.utils import logging as hf_logging

    was, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if was:
            hf_logging.enable_progress_bar()


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
    facts: ArmFacts,
    max_positions: int,
    options: CardOptions,
) -> None:

    notes = []
    if model.arch.sliding_windows:
        notes.append(
            f"Attention windows per layer (tokens back a query sees), as trained: {list(model.window_sizes)}; "
            "transformers' `sliding_window` (the query included) is one more."
        )
    card = CardModel(
        tag=tag,
        step=step,
        architecture=model.config.architecture,
        variant=model.rope.variant.value,
        model_class=_class_name(remote),
        remote_code=remote,
        rope_text=f"`{model.rope.describe()}`: {FORMULAS[model.rope.variant]}",
        rope_parameters=rope_parameters,
        max_positions=max_positions,
        original_len=int(model.rope.original_len),
        roundtrip=f"`rlab export` loaded this folder back and compared it with rlab: {roundtrip.describe()}.",
        notes=notes,
    )
    chain = lineage(layout.checkpoints_root, tag, step, meta)
    (out / "README.md").write_text(render_card(card, chain, facts, options))


def _set_modes(folder: Path) -> None:
    """Every file 0644 (safetensors writes its file 0600), whatever the umask."""
    for path in folder.iterdir():
        path.chmod(FILE_MODE)
