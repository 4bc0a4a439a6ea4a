"""`rlab rope inspect`: show what a RoPE variant does to each rotary frequency.

    rlab rope inspect --variant yarn --head-dim 128 --scale 4 --original-len 2048
    rlab rope inspect --variant dynamic-ntk --scale 4 --seq-len 8192 --json
    rlab rope inspect --variant abf --base 10000 --new-base 500000
    rlab rope inspect --variant longrope --scale 4 --factors-file phi3/config.json --seq-len 8192

Without `--json` it prints a short table (frequency, wavelength in tokens, ratio to plain rope,
turns over the original context, the target and a short window) and the geometry of the extension
(`rlab.core.rope_geometry`: critical dimension, extrapolation bound, the base lower bound for the target,
warnings); with `--json` the full inverse frequencies, the attention factor and the geometry, which is
also how the variants are checked from outside. torch is imported only when the command runs, never at
`rlab --help`.
"""

from __future__ import annotations

# The spec models (pydantic), torch and rich are imported inside the functions that use them, so
# `rlab --help` stays fast.
import json
import math
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from rlab.cli.console import out
from rlab.cli.help_layout import RlabCommand, RlabGroup
from rlab.cli.options import a_name, passed
from rlab.errors import CheckpointError, SpecError
from rlab.paths import BaseLayout, checkpoint_steps, default_base_dir
from rlab.variants import VARIANT_NAMES

app = typer.Typer(help="Inspect RoPE variants.", no_args_is_help=True, cls=RlabGroup)


SPEC_FLAGS = (
    "variant beta_fast beta_slow attention_factor low_freq_factor high_freq_factor new_base factors_file"
).split()
"""The flags that set the rope spec's field of the same name."""
TABLE_ROWS = 16  # a head dim of 128 has 64 frequencies; the table shows an even sample of them
# Spec field -> the flag that sets it, so an error names what the user typed.
FLAGS = {
    "factor": "--scale",
    "original_len": "--original-len",
    "head_dim": "--head-dim",
    "seq_len": "--seq-len",
    "target_len": "--target-len",
    "window": "--window",
    "beta_fast": "--beta-fast",
    "beta_slow": "--beta-slow",
    "attention_factor": "--attention-factor",
    "low_freq_factor": "--low-freq-factor",
    "high_freq_factor": "--high-freq-factor",
    "base": "--base",
    "new_base": "--new-base",
    "factors_file": "--factors-file",
    "short_factor": "--factors-file",
    "long_factor": "--factors-file",
}


@app.command("inspect", cls=RlabCommand)
def inspect(
    variant: str = typer.Option(
        "rope",
        "--variant",
        "-v",
        metavar="NAME",  # a str: a typo gets "did you mean"
        help=f"RoPE variant, any case: {', '.join(VARIANT_NAMES)}.",
    ),
    head_dim: int | None = typer.Option(
        None, "--head-dim", help="Attention head dimension d (even). (default: the checkpoint's, else 128)"
    ),
    base: float | None = typer.Option(
        None, "--base", help="Rotary base theta. (default: the checkpoint's, else 10000)"
    ),
    scale: float = typer.Option(1.0, "--scale", "-s", help="Scale factor s = target / original context."),
    original_len: int | None = typer.Option(
        None,
        "--original-len",
        help="Original (pretraining) context length L0. (default: the checkpoint's, else 2048)",
    ),
    seq_len: int | None = typer.Option(
        None,
        "--seq-len",
        help="Sequence length L the frequencies are evaluated at (dynamic-ntk only; default L0).",
    ),
    beta_fast: float = typer.Option(
        32.0, "--beta-fast", help="YaRN: turns per L0 above which a dim is kept."
    ),
    beta_slow: float = typer.Option(
        1.0, "--beta-slow", help="YaRN: turns per L0 below which a dim is interpolated."
    ),
    attention_factor: float | None = typer.Option(
        None, "--attention-factor", help="YaRN: attention temperature mscale (default 0.1*ln(s)+1)."
    ),
    low_freq_factor: float = typer.Option(1.0, "--low-freq-factor", help="llama3: low-frequency factor."),
    high_freq_factor: float = typer.Option(4.0, "--high-freq-factor", help="llama3: high-frequency factor."),
    new_base: float | None = typer.Option(
        None, "--new-base", help="abf: the raised rotary base (required for abf; --base is the original one)."
    ),
    factors_file: Path | None = typer.Option(
        None,
        "--factors-file",
        help="longrope: JSON with short_factor and long_factor (top level, or a config.json's rope_scaling).",
    ),
    target_len: int | None = typer.Option(
        None,
        "--target-len",
        help="Target context for the geometry (default: L0 x scale, or 4 x L0 when scale is 1).",
    ),
    window: int | None = typer.Option(
        None, "--window", help="A short attention window in tokens (e.g. 512): which pairs turn within it."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print JSON: inv_freq (all of them), attention_factor, geometry, ..."
    ),
    tag: str | None = typer.Option(
        None,
        "--tag",
        callback=a_name("tag"),
        help="Read head size, base, L0 and the short window from this checkpoint's meta (its newest step).",
    ),
    base_tag: str | None = typer.Option(
        None, "--base-tag", callback=a_name("tag"), help="Read them from this tag at --from-step."
    ),
    from_step: int | None = typer.Option(None, "--from-step", metavar="N", help="The step of --base-tag."),
    base_dir: Path | None = typer.Option(
        None, "--base-dir", help="Base dir of the checkpoint. (default: $RLAB_BASE_DIR, ...)"
    ),
) -> None:
    """Print a variant's inverse frequencies and attention factor."""
    flags = dict(locals())  # every flag by its parameter name (nothing else is bound yet)
    source = tag or base_tag
    known = checkpoint_facts(source, from_step, base_dir) if source else {}
    head_dim = head_dim or known.get("head_dim", 128)
    window = window or known.get("window")
    fields = {
        **passed(flags, *SPEC_FLAGS),
        "base": base or known.get("base", 10000.0),
        "factor": scale,
        "original_len": original_len or known.get("original_len", 2048),
    }
    try:
        _inspect(fields, head_dim, seq_len, target_len, window, as_json)
    except SpecError as exc:
        raise SpecError(_with_flag_names(exc.message), exc.hint) from None


def checkpoint_facts(tag: str, step: int | None, base_dir: Path | None) -> dict[str, Any]:
    """head_dim, base, L0 and the short attention window (nanochat-2026 windows) of a checkpoint, from its meta."""
    from rlab.core.architecture import window_sizes
    from rlab.core.checkpoint import inspect_checkpoint
    from rlab.core.checkpoint_meta import read_meta

    ckpt_dir = BaseLayout((base_dir or default_base_dir()).expanduser()).checkpoint_dir(tag)
    steps = checkpoint_steps(ckpt_dir)
    if not steps or (step is not None and step not in steps):
        found = ", ".join(map(str, steps)) or "none"
        raise CheckpointError(f"No checkpoint of '{tag}' at {ckpt_dir} (steps: {found}).", "See `rlab ls`.")
    step = step if step is not None else steps[-1]
    info, meta = inspect_checkpoint(ckpt_dir, step), read_meta(ckpt_dir, step)
    rope = meta.rope_spec(info.rotary_base)
    shape = meta.shape
    l0 = int(rope.original_len or info.sequence_len)
    sizes = window_sizes(info.window_pattern, shape.n_layer, info.sequence_len)
    short = min(sizes) if min(sizes) < info.sequence_len else None
    return {"head_dim": shape.n_embd // shape.n_head, "base": rope.base, "original_len": l0, "window": short}


def _with_flag_names(message: str) -> str:
    """ "factor: must be > 0" -> "--scale: must be > 0" (spec field names become the flags that set them)."""
    field, sep, rest = message.partition(": ")
    return f"{FLAGS[field]}: {rest}" if sep and field in FLAGS else message


def _inspect(
    fields: dict[str, Any],
    head_dim: int,
    seq_len: int | None,
    target_len: int | None,
    window: int | None,
    as_json: bool,
) -> None:
    from rlab.spec.rope import build_rope_spec, parse_variant

    spec = build_rope_spec(**{**fields, "variant": parse_variant(fields["variant"])})
    base, scale, original_len = spec.base, spec.factor, spec.original_len
    assert base is not None and original_len is not None  # the flags always give them
    for name, value in (("seq_len", seq_len), ("target_len", target_len), ("window", window)):
        if value is not None and value <= 0:
            raise SpecError(f"{name}: must be > 0 (got {value})")
    target = target_len or (round(original_len * scale) if scale > 1 else 4 * original_len)

    from rlab.core import rope_frequencies as rope_lib  # numpy: no torch to wait for
    from rlab.core import rope_geometry

    rope_lib.check_head_dim(head_dim)
    geometry = rope_geometry.assess(spec, head_dim, target)

    freqs = rope_lib.inv_freq_values(spec, head_dim, seq_len)
    plain = rope_lib.inv_freq_values(build_rope_spec(base=base), head_dim)
    mscale = rope_lib.attention_factor(spec)
    report = {
        "variant": spec.variant.value,
        "formula": rope_lib.FORMULAS[spec.variant],
        "head_dim": head_dim,
        "base": base,
        "scale": scale,
        "original_len": original_len,
        "seq_len": seq_len,
        "rope": spec.model_dump(mode="json"),
        "inv_freq": freqs,
        "attention_factor": mscale,
        "logit_scale": mscale**2,
        "target_len": target,
        "window": window,
        "window_pairs": None if window is None else rope_geometry.critical_pairs(freqs, window),
        "geometry": geometry.as_json(),
    }
    if as_json:
        typer.echo(json.dumps(report))
        return
    _print_table(report, plain)
    _print_geometry(report, geometry)


def _print_geometry(report: dict, geometry: Any) -> None:

    lines = geometry.summary()
    if report["window"] is not None:
        lines.append(
            f"a short window of {report['window']} tokens: {report['window_pairs']} of {geometry.pairs} pairs "
            "of this variant turn a full period within it"
        )
    out.print("geometry:", highlight=False)
    for line in lines:
        out.print(f"  {line}", highlight=False, markup=False)
    for line in geometry.warnings():
        out.print(f"  warning: {line}", highlight=False, markup=False, style="yellow")


def _print_table(report: dict, plain: list[float]) -> None:

    freqs: list[float] = report["inv_freq"]
    n = len(freqs)
    rows = (
        sorted({round(i * (n - 1) / (TABLE_ROWS - 1)) for i in range(TABLE_ROWS)})
        if n > TABLE_ROWS
        else range(n)
    )
    shown = "" if n <= TABLE_ROWS else f", showing {len(rows)} of {n} (--json for all)"
    table = Table(
        title=escape(f"{report['variant']}: {report['formula']}{shown}"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    columns = ["i", "inv_freq", "wavelength (tokens)", "ratio to rope", "turns in L0", "in target"]
    if report["window"] is not None:
        columns.append("in window")
    for column in columns:
        table.add_column(column, justify="right", min_width=len(column))
    for i in rows:
        wavelength = 2 * math.pi / freqs[i]
        table.add_row(
            str(i),
            f"{freqs[i]:.4g}",
            f"{wavelength:,.1f}",
            f"{freqs[i] / plain[i]:.4f}",
            f"{report['original_len'] / wavelength:.3g}",
            f"{report['target_len'] / wavelength:.3g}",
            *([f"{report['window'] / wavelength:.3g}"] if report["window"] is not None else []),
        )
    out.print(table)
    out.print(
        f"attention factor (mscale) {report['attention_factor']:.6g}; "
        f"attention logits x{report['logit_scale']:.6g}",
        highlight=False,
    )
