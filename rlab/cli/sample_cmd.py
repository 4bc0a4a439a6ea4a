"""`rlab sample`: continue a prompt with one tag's checkpoint (KV-cache engine, one row per sample)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rlab.cli.console import err, out
from rlab.cli.options import BaseDirOpt, StepOpt, number, tag_option
from rlab.paths import default_base_dir


def sample(
    tag: Annotated[str, tag_option("Model tag under <base>/base_checkpoints/ (e.g. d20-pi).", metavar=None)],
    prompt: Annotated[str, typer.Option("--prompt", "-p", help="Text to continue (BOS is prepended).")] = "",
    step: StepOpt = None,
    num_samples: Annotated[
        int, number("--num-samples", "-n", low=1, help="Independent samples (batched rows).")
    ] = 1,
    temperature: Annotated[
        float, number("--temperature", low=0.0, metavar="X", help="0 = greedy; 1 = the model's distribution.")
    ] = 1.0,
    top_k: Annotated[
        Optional[int], number("--top-k", low=1, help="Sample among the k most likely tokens (default: all).")
    ] = None,
    max_tokens: Annotated[int, number("--max-tokens", low=1, help="Tokens to generate per sample.")] = 64,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed (same seed, same samples).")] = 42,
    device: Annotated[
        Optional[str], typer.Option("--device", help="cpu, cuda, cuda:1 ... (default: cuda if present).")
    ] = None,
    base_dir: BaseDirOpt = None,
) -> None:
    """Generate continuations of --prompt from a tag's checkpoint and print them."""
    from rlab.core.engine import sample_checkpoint

    root = Path(base_dir) if base_dir is not None else default_base_dir()
    texts, meta = sample_checkpoint(
        root,
        tag,
        prompt,
        step=step,
        num_samples=num_samples,
        max_tokens=max_tokens,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        device=device,
    )
    err.print(
        f"[dim]{tag} step {meta.step} · temperature {temperature:g} · top-k {top_k or 'all'} · seed {seed}[/]"
    )
    for i, text in enumerate(texts):
        if num_samples > 1:
            out.rule(f"sample {i + 1}/{num_samples}")
        out.print(prompt + text, markup=False, highlight=False)
