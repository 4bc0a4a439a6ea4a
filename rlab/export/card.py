"""The README card of an exported folder: what the model is, where it came from, what it measured, how to load it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlab.core.checkpoint_meta import CheckpointMeta, load_meta
from rlab.errors import CheckpointError
from rlab.records.eval_doc import EvalDoc


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
    from rlab.paths import meta_file

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


def result_lines(doc: EvalDoc | None, where: Path | None) -> Iterator[str]:
    """The tag's measured numbers from its eval.json (rlab eval), one bullet each (each section's `card_lines`)."""
    if doc is None:
        yield f"- No evaluation found{f' at {where}' if where else ''} (`rlab eval --tag ...` writes one)."
        return
    yield f"From `{where}` (step {doc.step}, experiment `{doc.experiment}`):"
    for name in doc.metrics.present():
        section = doc.metrics.get(name)
        yield from section.card_lines() if section is not None else []


def render_card(
    *,
    title: str,
    architecture: str,
    model_class: str,
    remote_code: bool,
    rope_text: str,
    rope_parameters: dict[str, Any],
    chain: list[Ancestor],
    results: list[str],
    roundtrip: str,
    notes: list[str],
) -> str:
    """README.md of the folder (markdown)."""
    load = "AutoModelForCausalLM.from_pretrained(folder" + (
        ", trust_remote_code=True)" if remote_code else ")"
    )
    lines = [
        f"# {title}",
        "",
        f"A {architecture} GPT exported by rlab (`rlab export --format hf`), loaded by transformers as "
        f"`{model_class}`{' from `modeling_rlab_nanochat.py` in this folder (trust_remote_code)' if remote_code else ''}.",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        f"model = {load}",
        "tokenizer = AutoTokenizer.from_pretrained(folder)  # prepends <|bos|>, as the model trained",
        "```",
        "",
        "## RoPE",
        "",
        f"{rope_text}; in transformers' vocabulary:",
        "",
        "```json",
        json.dumps(rope_parameters, indent=2),
        "```",
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
        "## Results",
        "",
        *results,
        "",
        "## Export check",
        "",
        roundtrip,
        "",
        *(["## Notes", "", *(f"- {n}" for n in notes), ""] if notes else []),
    ]
    return "\n".join(lines)
