"""The README card of an exported folder: what the model is, where it came from, what it measured, how to load it.

Hub-ready: a YAML metadata header (library, pipeline, tags with the variant, license and base model where
known), code that runs as written from inside the folder (`tests/export` executes every python block), the
training recipe and the experiment's verdicts for the arm from results.csv, and no local absolute paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rlab.core.checkpoint_meta import CheckpointMeta, load_meta
from rlab.errors import CheckpointError
from rlab.export.arm_facts import unit_of
from rlab.paths import meta_file

if TYPE_CHECKING:
    from rlab.export.arm_facts import ArmFacts


@dataclass(frozen=True)
class Ancestor:
    """One checkpoint of the arm's lineage (itself first, then its parent, ...)."""

    tag: str
    step: int
    variant: str | None
    rope: str | None
    tokens_trained: int | None
    seq_len: int | None


def lineage(
    checkpoints_root: Path, tag: str, step: int, meta: CheckpointMeta | None, limit: int = 20
) -> list[Ancestor]:
    """The chain of checkpoints this one was cloned from, read from each meta's `lineage` (stops where a meta is
    missing: a nanochat base records none)."""

    chain: list[Ancestor] = []
    seen: set[tuple[str, int]] = set()
    while meta is not None and (tag, step) not in seen and len(chain) < limit:
        seen.add((tag, step))
        chain.append(
            Ancestor(
                tag=tag,
                step=step,
                variant=meta.variant,
                rope=meta.rope.describe() if meta.rope is not None else None,
                tokens_trained=meta.tokens_trained,
                seq_len=meta.sequence_len,
            )
        )
        parent = meta.lineage
        if parent is None:
            break
        tag, step = parent.parent_tag, parent.parent_step
        meta = _parent_meta(meta_file(checkpoints_root / tag, step))
        if meta is None:
            chain.append(Ancestor(tag, step, None, None, None, None))
    return chain


def _parent_meta(path: Path) -> CheckpointMeta | None:
    """A parent's meta; None when it is gone or unreadable (the chain stops there)."""
    try:
        return load_meta(path) if path.is_file() else None
    except CheckpointError:
        return None


@dataclass(frozen=True)
class CardOptions:
    """What the checkpoint cannot tell: the Hub ids of the model and its base, and the license."""

    model_id: str = "."  # the snippets load this: the folder itself (run from inside it) or its Hub repo id
    subfolder: str | None = None  # the arm's folder inside that repo (`export --all --push`)
    base_model: str | None = None
    license: str | None = None

    def load_args(self, remote_code: bool) -> str:
        """The arguments after the model id in the snippets' from_pretrained calls."""
        sub = f', subfolder="{self.subfolder}"' if self.subfolder else ""
        return sub + (", trust_remote_code=True" if remote_code else "")


@dataclass(frozen=True)
class CardModel:
    """The exported model as the card describes it."""

    tag: str
    step: int
    architecture: str
    variant: str
    model_class: str
    remote_code: bool
    rope_text: str
    rope_parameters: dict[str, Any]
    max_positions: int
    original_len: int
    roundtrip: str
    notes: list[str]


def render_card(model: CardModel, chain: list[Ancestor], facts: ArmFacts, options: CardOptions) -> str:
    """README.md of the folder (markdown with a YAML metadata header)."""
    remote = options.load_args(model.remote_code)
    tags = ["rlab", "nanochat", model.architecture, "rope-scaling", "context-extension", model.variant]
    lines = [
        metadata_header(tags, options),
        f"# {model.tag} (step {model.step})",
        "",
        f"A {model.architecture} GPT with {model.variant} RoPE, exported by rlab (`rlab export --format hf`), loaded "
        f"by transformers as `{model.model_class}`"
        f"{' from `modeling_rlab_nanochat.py` in this folder (trust_remote_code)' if model.remote_code else ''}. "
        f"It serves up to {model.max_positions:,} tokens (`max_position_embeddings`; L0 {model.original_len:,}).",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f'model_id = "{options.model_id}"'
        + (
            "  # this folder (run from inside it), or its Hub repo id once uploaded"
            if options.model_id == "."
            else ""
        ),
        f"tokenizer = AutoTokenizer.from_pretrained(model_id{remote})  # prepends <|bos|>, pads on the left",
        f"model = AutoModelForCausalLM.from_pretrained(model_id{remote})",
        'inputs = tokenizer(["The capital of France is", "Once upon a time"], return_tensors="pt", padding=True)',
        "out = model.generate(**inputs, max_new_tokens=16, do_sample=False)",
        'print(tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1] :]))',
        "```",
        "",
        "## RoPE",
        "",
        f"{model.rope_text}; in transformers' vocabulary:",
        "",
        "```json",
        json.dumps(model.rope_parameters, indent=2),
        "```",
        "",
        "## Training recipe",
        "",
        *recipe_lines(facts, chain),
        "",
        "## Lineage",
        "",
        "| tag | step | variant | RoPE | sequence_len | tokens trained |",
        "|---|---|---|---|---|---|",
        *(
            f"| {a.tag} | {a.step} | {a.variant or ''} | {a.rope or ''} | {a.seq_len or ''} | "
            f"{'' if a.tokens_trained is None else f'{a.tokens_trained:,}'} |"
            for a in chain
        ),
        "",
        "## Verdicts",
        "",
        *verdict_lines(facts),
        "",
        "## Results",
        "",
        *result_lines(facts),
        "",
        "## Export check",
        "",
        model.roundtrip,
        "",
        *(["## Notes", "", *(f"- {n}" for n in model.notes), ""] if model.notes else []),
    ]
    return "\n".join(lines)


def metadata_header(tags: list[str], options: CardOptions) -> str:
    """The Hub's YAML front matter (license and base model only where known)."""

    meta: dict[str, Any] = {}
    if options.license:
        meta["license"] = options.license
    if options.base_model:
        meta["base_model"] = options.base_model
    meta |= {
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": list(dict.fromkeys(tags)),
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n"


def recipe_lines(facts: ArmFacts, chain: list[Ancestor]) -> list[str]:
    """Steps, length, tokens and learning rates of the run that made this arm (its run.json)."""
    tokens = chain[0].tokens_trained if chain else None
    if tokens is None and facts.row.get("tokens_trained", "").isdigit():
        tokens = int(facts.row["tokens_trained"])
    tokens_text = f"{tokens:,} tokens behind these weights" if tokens is not None else "tokens not recorded"
    run = facts.run
    if run is None:
        return [
            f"- No run config recorded for this tag (a base, or trained outside an experiment); {tokens_text}."
        ]
    t, lr = run.train, run.train.lr
    kind = "applied without training (zero-shot arm)" if t.steps == 0 else f"{t.steps:,} steps"
    batch = f"{t.total_batch_size:,} tokens" if t.total_batch_size else "device batch x ranks rows"
    return [
        f"- Experiment `{run.experiment}`, arm `{run.tag}` ({run.variant}): {kind} at {t.seq_len:,} tokens per row, "
        f"from `{run.lineage.parent_tag}@{run.lineage.parent_step}`; {tokens_text}."
        if run.lineage is not None
        else f"- Experiment `{run.experiment}`, arm `{run.tag}` ({run.variant}): {kind} at {t.seq_len:,} tokens per "
        f"row; {tokens_text}.",
        f"- Batch: {t.device_batch_size} rows per device, {batch} per step; seed {t.seed}.",
        f"- Learning rates: matrix {lr.matrix_lr:g}, embedding {lr.embedding_lr:g}, unembedding {lr.unembedding_lr:g}, "
        f"scalar {lr.scalar_lr:g}; warmup {lr.warmup_steps} steps, warmdown {lr.warmdown_frac:.0%}, final "
        f"{lr.final_lr_frac:g}x; weight decay {lr.weight_decay:g}.",
    ]


def verdict_lines(facts: ArmFacts) -> list[str]:
    """The arm's comparisons in results.csv: difference, 95% interval, units, verdict, with each metric's unit."""

    if not facts.verdicts:
        where = f"experiment `{facts.experiment}`" if facts.experiment else "no experiment"
        return [
            f"- No verdicts in results.csv for this arm ({where}; `rlab report -e EXPERIMENT` writes them)."
        ]
    row = facts.row
    n_seeds = row.get("n_seeds") or "1"
    seeds = f"{n_seeds} seed{'' if n_seeds == '1' else 's'}, seed {row.get('seed') or '?'}"
    lines = [
        f"From `results.csv` of experiment `{facts.experiment}` (arm `{row.get('arm', '')}`, {seeds}; "
        "difference = this arm minus the reference, 95% interval over the eval units):",
        "",
        "| metric | unit | vs | difference [95% CI] | units | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for v in facts.verdicts:
        interval = f" [{_num(v.ci_low)}, {_num(v.ci_high)}]" if v.ci_low and v.ci_high else ""
        better = f" ({v.direction})" if v.direction else ""
        lines.append(
            f"| {v.metric}{better} | {unit_of(v.metric)} | {v.control} | {_num(v.diff)}{interval} | "
            f"{v.n_units or ''} | {v.verdict}{f' ({v.family})' if v.family else ''} |"
        )
    return lines


def _num(text: str) -> str:
    try:
        return f"{float(text):+.4g}"
    except ValueError:
        return text


def result_lines(facts: ArmFacts) -> list[str]:
    """The tag's measured numbers from its eval.json (rlab eval), one bullet each (each section's `card_lines`)."""
    doc = facts.eval_doc
    if doc is None:
        where = f" at `{facts.eval_where}`" if facts.eval_where else ""
        return [f"- No evaluation found{where} (`rlab eval --tag ...` writes one)."]
    lines = [f"From `{facts.eval_where}` (step {doc.step}, experiment `{doc.experiment}`):"]
    for name in doc.metrics.present():
        section = doc.metrics.get(name)
        lines.extend(section.card_lines() if section is not None else [])
    return lines
