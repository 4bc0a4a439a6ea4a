"""`rlab validate SPEC` (every problem at once: the spec's, with its YAML path, then what `rlab continue`
would refuse against the base dir) and `rlab schema` (JSON Schema)."""

from __future__ import annotations

# The spec models (pydantic) and rich are imported inside each command, so `rlab --help` stays fast.
import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from rlab.atomic_io import write_text_atomic
from rlab.cli.console import err, out
from rlab.cli.options import BaseDirOpt, ResultsDirOpt


def validate(
    spec_path: Annotated[
        Path, typer.Argument(metavar="SPEC", help="Experiment spec to check.", dir_okay=False)
    ],
    base_dir: BaseDirOpt = None,
    results_dir: ResultsDirOpt = None,
    spec_only: Annotated[
        bool,
        typer.Option("--spec-only", help="Check the file alone, not the base dir, tags, disk and launcher."),
    ] = False,
) -> None:
    """Check an experiment spec and run `rlab continue`'s preflight on it; print every problem, or a summary."""
    from rlab.orchestrate.launch import visible_gpus, with_default_nproc
    from rlab.orchestrate.preflight import preflight_continue
    from rlab.spec.loading import load_spec

    spec = load_spec(spec_path, base_dir=base_dir, results_dir=results_dir)
    if not spec_only:  # the checks `rlab continue` runs; a base that `pretrain:` makes may not exist yet
        pf = preflight_continue(with_default_nproc(spec, visible_gpus()), base_made_by_pretrain=True)
        for line in pf.warnings:
            err.print(f"[yellow]warning:[/] {escape(line)}", highlight=False)
        if not pf.ok:
            raise pf.error()
        spec = pf.spec
    parts = [
        f"experiment {spec.experiment}",
        f"base {spec.base.tag}" + (f"@{spec.base_step}" if spec.base_step is not None else ""),
    ]
    if spec.variants:
        parts.append(f"{len(spec.variants)} variant(s): {', '.join(spec.variants)}")
    parts.append(
        f"seq_len {spec.train.seq_len}, {spec.train.steps} steps, {spec.launch.nnodes}x"
        f"{spec.launch.procs_per_job} procs"
    )
    if spec.pretrain is not None:
        parts.append(f"pretrain {spec.pretrain.train.steps} steps at {spec.pretrain.train.seq_len}")
    out.print(f"[green]OK[/] {escape(str(spec_path))}: " + escape("; ".join(parts)), highlight=False)


def schema(
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Print the experiment spec's JSON Schema (for editor completion and validation)."""
    from rlab.spec.experiment import ExperimentSpec

    text = json.dumps(ExperimentSpec.model_json_schema(), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_text_atomic(output, text)
        out.print(f"wrote {output}", highlight=False, markup=False)
