"""Probe: how closely does every exported arm match rlab in transformers? One table, both generations, every variant.

For each source checkpoint (nanochat's own d2 of each generation when $RLAB_NANOCHAT_REFERENCE is set, else a
tiny random model of each generation) and each variant applied zero-shot at 4x (L0 = sequence_len / 4, so the
export's check batch runs past L0), this writes the arm as a tag, runs `rlab export --format hf` on it (the
library call) and prints the export's own round-trip numbers: the largest |logit difference| against rlab on
its fixed batch, the argmax agreement, whether greedy `generate()` (KV cache, left-padded batch) equals rlab's
greedy sampler token for token, the served length and which transformers class loads it.

    RLAB_NANOCHAT_REFERENCE=../shared/nanochat_reference .venv/bin/python experiments/probes/export_roundtrip.py
    .venv/bin/python experiments/probes/export_roundtrip.py --tiny
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from rlab.core.checkpoint import load_model  # noqa: E402
from rlab.core.tokenizer import Tokenizer  # noqa: E402
from rlab.export.hf import export_hf  # noqa: E402
from rlab.paths import BaseLayout  # noqa: E402
from rlab.spec.rope import RopeSpec  # noqa: E402
from tests.core.tiny_checkpoints import random_model, write_checkpoint  # noqa: E402


def variants(l0: int, head_dim: int) -> dict[str, RopeSpec]:
    half = head_dim // 2
    factors = {
        "short_factor": [1.0 + 0.2 * i / half for i in range(half)],
        "long_factor": [1.0 + 3.0 * (i / half) ** 2 for i in range(half)],
    }
    common = {"factor": 4.0, "original_len": l0}
    return {
        "rope": RopeSpec(original_len=l0),
        "pi": RopeSpec(variant="pi", **common),
        "ntk": RopeSpec(variant="ntk", **common),
        "dynamic-ntk": RopeSpec(variant="dynamic-ntk", **common),
        "yarn": RopeSpec(variant="yarn", **common),
        "llama3": RopeSpec(variant="llama3", **common),
        "abf": RopeSpec(variant="abf", new_base=5_000_000.0, original_len=l0),
        "ntk-by-parts": RopeSpec(variant="ntk-by-parts", **common),
        "longrope": RopeSpec(variant="longrope", **common, **factors),
        "yarn, layers: global": RopeSpec(variant="yarn", layers="global", **common),
    }


def sources(tiny: bool, work: Path) -> list[tuple[str, Path, torch.nn.Module]]:
    """(label, base dir with the tokenizer, model) per generation."""
    reference = os.environ.get("RLAB_NANOCHAT_REFERENCE")
    out = []
    for version, arch in (("d314e96", "nanochat-2025"), ("head", "nanochat-2026")):
        base = work / arch
        if reference and not tiny:
            src = Path(reference) / version
            model, _ = load_model(BaseLayout(src).checkpoint_dir("d2"), 20)
            BaseLayout(base).tokenizer_dir.mkdir(parents=True)
            for f in BaseLayout(src).tokenizer_dir.iterdir():
                (BaseLayout(base).tokenizer_dir / f.name).write_bytes(f.read_bytes())
            out.append((f"{arch} (nanochat {version} d2@20)", base, model))
        else:
            tok = Tokenizer.train(["the quick brown fox jumps over the lazy dog 0123456789 " * 40], 300)
            tok.save(BaseLayout(base).tokenizer_dir)
            out.append((f"{arch} (tiny random)", base, random_model(arch, vocab_size=tok.vocab_size)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tiny", action="store_true", help="tiny random models even when the reference is set"
    )
    args = parser.parse_args()
    torch.set_num_threads(2)
    _line(
        "| generation | variant | loads as | serves | max abs logit diff | argmax agree | batch | generate() |"
    )
    _line("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, base, model in sources(args.tiny, Path(tmp)):
            l0 = model.config.sequence_len // 4
            for name, rope in variants(l0, model.config.head_dim).items():
                if model.arch.sliding_windows is False and "global" in name:
                    continue  # without windows every layer is global: the same arm as plain yarn
                model.set_rope(rope)
                tag = name.split(",")[0]
                write_checkpoint(base, tag, model, step=1)
                result = export_hf(base, tag, Path(tmp) / "out", force=True)
                r = result.roundtrip
                remote = "RlabNanoChat (trust_remote_code)" if _remote(Path(tmp) / "out") else "NanoChat"
                prompts = "+".join(map(str, r.generate_prompt_lens))
                _line(
                    f"| {label} | {name} | {remote} | {result.max_position_embeddings} | {r.max_abs_logit_diff:.2e} "
                    f"| {r.argmax_agreement:.1%} | {r.rows}x{r.length} (L0 {r.original_len}) "
                    f"| {'equal' if r.generate_match else 'DIFFERS'} (prompts {prompts}, +{r.generate_new_tokens}) |"
                )


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _remote(folder: Path) -> bool:
    return (folder / "modeling_rlab_nanochat.py").exists()


if __name__ == "__main__":
    main()
