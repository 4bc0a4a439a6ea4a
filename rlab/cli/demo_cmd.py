"""`rlab demo`: the whole mission on the embedded default corpus, on CPU, in minutes."""

from __future__ import annotations

# The orchestrator, spec loader and rich are imported inside the functions that use them, so
# `rlab --help` stays fast.
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from rlab.cli.console import err, out
from rlab.cli.options import at_least
from rlab.errors import LaunchError, SpecError
from rlab.paths import EVAL_BUNDLE_ENV, find_eval_bundle


def run_demo(
    base_dir: Annotated[
        Path,
        typer.Option(
            "--base-dir",
            file_okay=False,
            help="The demo's own data/checkpoint dir (replaced tags live here).",
        ),
    ] = Path(".cache/demo"),
    results_dir: Annotated[Path, typer.Option("--results-dir", file_okay=False, help="Results root.")] = Path(
        "results"
    ),
    spec: Annotated[
        Optional[Path],
        typer.Option("--spec", dir_okay=False, help="Demo spec; default experiments/demo.yaml."),
    ] = None,
    eval_bundle: Annotated[
        Optional[Path],
        typer.Option(
            "--eval-bundle",
            file_okay=False,
            help="CORE bundle; default $RLAB_EVAL_BUNDLE, <base-dir>/eval_bundle, then where "
            "`rlab bundle download` puts it (none: the demo runs without CORE).",
        ),
    ] = None,
    corpus: Annotated[
        Optional[list[str]],
        typer.Option(
            "--corpus", help="Text to train on instead of the embedded default (folders/files; repeatable)."
        ),
    ] = None,
    vocab_size: Annotated[
        Optional[int],
        typer.Option("--vocab-size", metavar="N", callback=at_least(265), help="Tokenizer vocabulary."),
    ] = None,
    no_check: Annotated[
        bool,
        typer.Option(
            "--no-check",
            help="Continue past the go/no-go check even if the base does not use context "
            "(a smoke test of the pipeline; its comparisons then show nothing).",
        ),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the commands; run nothing.")] = False,
) -> None:
    """Prepare the corpus, pretrain a tiny base model, continue it with every variant, evaluate, report.

    Each stage is the command a user would type (printed before it runs); the stage timings go to
    results/<experiment>/demo_timings.csv.
    """
    from rlab.evals.core.bundle import load_bundle, quiet_bundle_warnings
    from rlab.orchestrate.demo import DEMO_SPEC, data_is_stale, demo_stages

    spec = spec or DEMO_SPEC
    if not spec.is_file():
        raise SpecError(f"Demo spec not found: {spec}", "Run from the repository root or pass --spec.")
    bundle = find_eval_bundle(base_dir, eval_bundle)
    if bundle is None:
        err.print(
            "[yellow]No CORE eval bundle found: CORE is skipped[/] (get one with `rlab bundle download`, "
            f"or set ${EVAL_BUNDLE_ENV} to a copy)."
        )
    else:
        with quiet_bundle_warnings():
            load_bundle(bundle)  # a named bundle that is not one fails here, not at the eval stage
    stages = demo_stages(
        spec=spec,
        base_dir=base_dir.resolve(),
        results_dir=results_dir.resolve(),
        eval_bundle=bundle,
        corpus=corpus,
        vocab_size=vocab_size,
        rebuild_data=data_is_stale(base_dir.resolve()),
    )
    timings: list[tuple[str, float]] = []
    for stage in stages:
        command = (
            shlex.join(stage.argv)
            if stage.argv
            else "(in-process) copy loss of the base within its training length"
        )
        out.print(
            f"\n[bold cyan]== {stage.name}[/]  [dim]{escape(command)}[/]", highlight=False, soft_wrap=True
        )
        if dry_run:
            continue
        sys.stdout.flush()  # the stage header before the stage's own output, also when piped to a log
        start = time.perf_counter()
        if stage.argv is None:
            _go_no_go(base_dir.resolve(), spec, enforce=not no_check)
            timings.append((stage.name, time.perf_counter() - start))
            continue
        code = subprocess.call(stage.argv)
        timings.append((stage.name, time.perf_counter() - start))
        if code != 0:
            raise LaunchError(
                f"Demo stage '{stage.name}' failed (exit {code}).", f"Rerun it alone: {command}"
            )
    if dry_run:
        _power_line(spec, base_dir, results_dir)
        return
    _report_timings(timings, results_dir / _experiment_name(spec))


def _power_line(spec: Path, base_dir: Path, results_dir: Path) -> None:
    """What the demo's evals can detect vs its eval.target_mde (the power line `rlab continue --dry-run` prints)."""
    from rlab.cli.plan_view import render_power
    from rlab.cli.reporting import console_reporter
    from rlab.report.power.spec import check_experiment
    from rlab.spec.loading import load_spec

    resolved = load_spec(spec, base_dir=base_dir.resolve(), results_dir=results_dir.resolve())
    l0 = resolved.pretrain.train.seq_len if resolved.pretrain is not None else None
    render_power(check_experiment(resolved, l0), console_reporter())


def _go_no_go(base_dir: Path, spec: Path, enforce: bool = True) -> None:
    """Print the base's copy loss within L0; stop the demo (DemoCheckError) if it does not use context."""

    from rlab.orchestrate.demo_check import MIN_GAIN, check_base, require_pass
    from rlab.spec.loading import load_spec

    tag = load_spec(spec).base.tag
    result = check_base(base_dir, tag)
    table = Table(title=f"Go/no-go: does base '{tag}' use context within L0 = {result.seq_len}?")
    for col in ("distance", "window", "control", "repeat", "gain [95%]", "copy acc"):
        table.add_column(col, justify="right")
    for r in result.rows:
        table.add_row(
            str(r["distance"]),
            str(r["window"]),
            f"{r['control_nats']:.2f}",
            f"{r['copy_nats']:.2f}",
            f"{r['gain']:+.2f} [{r['gain_ci_low']:+.2f}, {r['gain_ci_high']:+.2f}]",
            f"{r['copy_acc']:.0%}",
        )
    out.print(table)
    if not enforce and not result.passed:
        err.print(
            "[yellow]no-go[/], going on anyway (--no-check): the base does not use context, so the "
            "comparisons that follow show nothing."
        )
        return
    require_pass(result, tag)
    out.print(
        f"[green]go[/]: the repeat is predicted {result.at_l0['gain']:.2f} nats/token better than in the "
        f"control (the passage not seen before) at distance {result.at_l0['distance']} (threshold {MIN_GAIN})."
    )


def _experiment_name(spec: Path) -> str:
    from rlab.spec.loading import load_spec

    return load_spec(spec).experiment


def _report_timings(timings: list[tuple[str, float]], experiment_dir: Path) -> None:

    total = sum(seconds for _, seconds in timings)
    table = Table(title="Demo wall time by stage")
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    for name, seconds in timings:
        table.add_row(name, f"{seconds:.1f}", f"{100 * seconds / total:.0f}%")
    table.add_row("total", f"{total:.1f}", "100%", style="bold")
    out.print(table)
    experiment_dir.mkdir(parents=True, exist_ok=True)
    lines = (
        ["stage,seconds"] + [f"{name},{seconds:.1f}" for name, seconds in timings] + [f"total,{total:.1f}"]
    )
    tmp = experiment_dir / "demo_timings.csv.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(experiment_dir / "demo_timings.csv")
    out.print(f"Results: {experiment_dir}/results.csv, comparison.md, plots/", markup=False)
