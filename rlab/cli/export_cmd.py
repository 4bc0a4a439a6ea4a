"""`rlab export`: a tag's checkpoint, or every arm of an experiment, as folders Hugging Face transformers loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from rlab.cli.console import out as console
from rlab.cli.options import BaseDirOpt, ExperimentOpt, JsonOpt, ResultsDirOpt, StepOpt, switch, tag_option
from rlab.errors import ExportError
from rlab.paths import default_base_dir, default_results_root


def export_tag(
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", file_okay=False, help="Folder to write (created).")
    ],
    tag: Annotated[
        Optional[str], tag_option("Model tag under <base>/base_checkpoints/ (e.g. d20-yarn).", metavar=None)
    ] = None,
    export_all: Annotated[
        bool, switch("--all", help="Every arm of --experiment: one folder per arm and an index README.")
    ] = False,
    experiment: ExperimentOpt = None,
    step: StepOpt = None,
    format: Annotated[  # noqa: A002 - the flag's name
        str,
        typer.Option(
            "--format", "-f", metavar="FORMAT", help="Target format: hf (Hugging Face transformers)."
        ),
    ] = "hf",
    push: Annotated[
        Optional[str],
        typer.Option(
            "--push",
            metavar="REPO_ID",
            help="Then upload the folder to this Hub model repo (needs huggingface_hub and a login).",
        ),
    ] = None,
    license: Annotated[  # noqa: A002 - the flag's name
        Optional[str], typer.Option("--license", metavar="ID", help="The card's license (e.g. mit).")
    ] = None,
    base_model: Annotated[
        Optional[str],
        typer.Option(
            "--base-model", metavar="REPO_ID", help="The card's base_model: the base's Hub repo id."
        ),
    ] = None,
    force: Annotated[bool, switch("--force", help="Replace --out when it exists.")] = False,
    base_dir: BaseDirOpt = None,
    results_dir: ResultsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export a tag (weights, tokenizer, config with its RoPE, README card) and check it round trip."""

    if format.lower() != "hf":
        raise ExportError(f"Unknown export format {format!r}.", "Available: hf (Hugging Face transformers).")
    if (tag is None) == (not export_all):
        raise ExportError("Give --tag TAG, or --all with --experiment NAME.")
    if export_all and not experiment:
        raise ExportError("--all exports the arms of one experiment: give --experiment NAME.")
    from rlab.export.card import CardOptions
    from rlab.export.experiment import export_experiment
    from rlab.export.experiment import push as push_folder
    from rlab.export.hf import export_hf

    base = Path(base_dir) if base_dir is not None else default_base_dir()
    options = CardOptions(model_id=push or ".", base_model=base_model, license=license)
    if export_all:
        assert experiment is not None
        root = Path(results_dir) if results_dir is not None else default_results_root()
        results = export_experiment(base, experiment, out, results_root=root, force=force, card=options)
    else:
        assert tag is not None
        results = [export_hf(base, tag, out, step=step, results_root=results_dir, force=force, card=options)]
    url = push_folder(out, push) if push else None
    if as_json:
        rows = [r.as_json() for r in results]
        typer.echo(json.dumps({"exports": rows, "pushed": url} if export_all else {**rows[0], "pushed": url}))
        return
    _print(results, out if export_all else None, url)


def _print(results, index: Path | None, url: str | None) -> None:

    for result in results:
        how = (
            "its own modeling file (trust_remote_code=True)"
            if result.remote_code
            else "transformers' own class"
        )
        console.print(
            f"{result.tag} step {result.step} ({result.architecture}, {result.rope}) -> {result.out}\n"
            f"  loads as {result.model_class} via {how}; serves {result.max_position_embeddings} tokens\n"
            f"  rope_parameters: {json.dumps(result.rope_parameters)}\n"
            f"  round trip: {result.roundtrip.describe()}\n"
            f"  files: {', '.join(result.files)}",
            markup=False,
            highlight=False,
        )
    if index is not None:
        console.print(f"index: {index / 'README.md'}", markup=False, highlight=False)
    if url:
        console.print(f"pushed: {url}", markup=False, highlight=False)
