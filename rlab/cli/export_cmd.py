"""`rlab export`: one tag's checkpoint as a folder another ecosystem loads (Hugging Face transformers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from rlab.cli.options import BaseDirOpt, JsonOpt, ResultsDirOpt, a_name, at_least, switch


def export_tag(
    tag: Annotated[
        str,
        typer.Option(
            "--tag",
            "-t",
            callback=a_name("tag"),
            help="Model tag under <base>/base_checkpoints/ (e.g. d20-yarn).",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", file_okay=False, help="Folder to write (created).")
    ],
    step: Annotated[
        Optional[int],
        typer.Option(
            "--step", metavar="N", callback=at_least(0), help="Checkpoint step (default: newest complete)."
        ),
    ] = None,
    format: Annotated[  # noqa: A002 - the flag's name
        str,
        typer.Option(
            "--format", "-f", metavar="FORMAT", help="Target format: hf (Hugging Face transformers)."
        ),
    ] = "hf",
    force: Annotated[bool, switch("--force", help="Replace --out when it exists.")] = False,
    base_dir: BaseDirOpt = None,
    results_dir: ResultsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export a tag (weights, tokenizer, config with its RoPE, README card) and check it round trip."""
    from rlab.cli.console import out as console
    from rlab.errors import ExportError
    from rlab.paths import default_base_dir

    if format.lower() != "hf":
        raise ExportError(f"Unknown export format {format!r}.", "Available: hf (Hugging Face transformers).")
    from rlab.export.hf import export_hf

    result = export_hf(
        Path(base_dir) if base_dir is not None else default_base_dir(),
        tag,
        out,
        step=step,
        results_root=results_dir,
        force=force,
    )
    if as_json:
        typer.echo(json.dumps(result.as_json()))
        return
    how = (
        "its own modeling file (trust_remote_code=True)" if result.remote_code else "transformers' own class"
    )
    console.print(
        f"{result.tag} step {result.step} ({result.architecture}, {result.rope}) -> {result.out}\n"
        f"  loads as {result.model_class} via {how}\n"
        f"  rope_parameters: {json.dumps(result.rope_parameters)}\n"
        f"  round trip: {result.roundtrip.describe()}\n"
        f"  files: {', '.join(result.files)}",
        markup=False,
        highlight=False,
    )
