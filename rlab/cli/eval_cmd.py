"""`rlab eval`: evaluate one tag (or --all tags of an experiment) with the eval worker.

    rlab eval --tag d20-pi                        # settings from results/<exp>/spec.resolved.yaml if there
    rlab eval --spec experiments/demo.yaml --all
    rlab eval --tag d20-yarn --no-core --lengths 2048,8192,32768 --nproc 8

Writes evals/<tag>/eval_run.json, then runs `python -m rlab.evals` on it (under torchrun when
--nproc > 1), streaming its output to the terminal and to evals/<tag>/eval.log. The tag must
be named: rlab never guesses which model you meant.
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator) are local to the functions that use them, so
# `rlab --help` stays fast; the command's signature names only typer and option aliases.
import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from rlab.cli.options import (
    EVALS_PANEL,
    PATHS_PANEL,
    BaseDirOpt,
    BaseTagOpt,
    DryRunOpt,
    ExperimentOpt,
    JsonOpt,
    NprocOpt,
    ResultsDirOpt,
    SpecOpt,
    at_least,
    switch,
)
from rlab.errors import CheckpointError, EvalError, SpecError, unknown_name_error
from rlab.paths import ExperimentLayout, default_results_root, meta_file

if TYPE_CHECKING:
    from rlab.spec.experiment import ExperimentSpec
    from rlab.spec.run import EvalRunConfig


def eval_tag(
    tag: Annotated[
        Optional[str], typer.Option("--tag", "-t", metavar="TAG", help="Tag to evaluate (e.g. d20-pi).")
    ] = None,
    all_tags: Annotated[bool, switch("--all", help="Evaluate every variant tag of the experiment.")] = False,
    as_json: JsonOpt = False,
    spec_path: SpecOpt = None,
    experiment: ExperimentOpt = None,
    base_dir: BaseDirOpt = None,
    base_tag: BaseTagOpt = None,
    results_dir: ResultsDirOpt = None,
    step: Annotated[
        Optional[int],
        typer.Option(
            "--step", metavar="N", callback=at_least(0), help="Checkpoint step. (default: the newest)"
        ),
    ] = None,
    bpb: Annotated[
        Optional[bool],
        typer.Option("--bpb/--no-bpb", metavar="", rich_help_panel=EVALS_PANEL, help="Train/val BPB."),
    ] = None,
    bpb_length: Annotated[
        Optional[bool],
        typer.Option(
            "--bpb-length/--no-bpb-length", metavar="", rich_help_panel=EVALS_PANEL, help="BPB vs length."
        ),
    ] = None,
    core: Annotated[
        Optional[bool],
        typer.Option("--core/--no-core", metavar="", rich_help_panel=EVALS_PANEL, help="DCLM CORE."),
    ] = None,
    passkey: Annotated[
        Optional[bool],
        typer.Option(
            "--passkey/--no-passkey", metavar="", rich_help_panel=EVALS_PANEL, help="Passkey retrieval."
        ),
    ] = None,
    ruler: Annotated[
        Optional[bool],
        typer.Option(
            "--ruler/--no-ruler", metavar="", rich_help_panel=EVALS_PANEL, help="RULER-style synthetic tasks."
        ),
    ] = None,
    lengths: Annotated[
        Optional[str],
        typer.Option(
            "--lengths",
            metavar="N,N,...",
            rich_help_panel=EVALS_PANEL,
            help="Context lengths for BPB-vs-length, e.g. 1024,2048,4096. "
            "(default: the spec's eval.lengths, else 0.5x-8x the model's length)",
        ),
    ] = None,
    max_per_task: Annotated[
        Optional[int],
        typer.Option(
            "--max-per-task",
            metavar="N",
            callback=at_least(1),
            rich_help_panel=EVALS_PANEL,
            help="CORE examples per task. (default: all)",
        ),
    ] = None,
    tasks: Annotated[
        Optional[str],
        typer.Option(
            "--tasks",
            metavar="T,T,...",
            rich_help_panel=EVALS_PANEL,
            help="CORE tasks, lm-eval style: labels or globs (hellaswag,arc_*); turns --core on. (default: all)",
        ),
    ] = None,
    list_tasks: Annotated[
        bool, switch("--list-tasks", help="List the CORE tasks of the bundle and exit.", panel=EVALS_PANEL)
    ] = False,
    eval_bundle: Annotated[
        Optional[Path],
        typer.Option(
            "--eval-bundle",
            metavar="DIR",
            rich_help_panel=PATHS_PANEL,
            help="DCLM CORE bundle dir. (default: $RLAB_EVAL_BUNDLE, <base_dir>/eval_bundle, then where "
            "`rlab bundle download` puts it)",
        ),
    ] = None,
    nproc: NprocOpt = None,
    force: Annotated[
        bool,
        switch(
            "--force",
            help="Drop evals of an earlier checkpoint that this run does not redo (else it refuses).",
        ),
    ] = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Evaluate a tag (BPB, BPB vs length, CORE, passkey, RULER-style tasks) and write its per-tag outputs."""
    from rlab.cli.console import err, human_lines_to_stderr, out
    from rlab.orchestrate.clone import checkpoint_steps, list_tags
    from rlab.orchestrate.launch import format_command, visible_gpus
    from rlab.orchestrate.plan import base_layout, experiment_layout, plan_eval
    from rlab.orchestrate.preflight import require_writable_results
    from rlab.orchestrate.prepare import with_saved_variants
    from rlab.spec.run import write_config

    if list_tasks or (tasks is not None and tasks.strip().lower() == "list"):
        from rlab.cli.core_tasks import print_tasks

        print_tasks(spec_path, eval_bundle, base_dir=base_dir, results_dir=results_dir, as_json=as_json)
        return
    if tag is None and not all_tags:
        raise SpecError(
            "Which tag? rlab eval needs --tag TAG (or --all with --spec/--experiment).",
            "List the tags with `rlab ls`.",
        )
    if tag is not None and all_tags:
        raise SpecError("--tag and --all contradict each other.", "Give one of them.")
    spec, meta = _resolve_spec(
        spec_path, tag, experiment=experiment, base_dir=base_dir, base_tag=base_tag, results_dir=results_dir
    )
    spec = _apply_eval_flags(
        spec,
        bpb=bpb,
        bpb_length=bpb_length,
        core=core,
        passkey=passkey,
        ruler=ruler,
        lengths=lengths,
        max_per_task=max_per_task,
        eval_bundle=eval_bundle,
        tasks=tasks,
    )
    base = base_layout(spec)
    from rlab.evals.core_bundle import check_task_selection, no_bundle_error
    from rlab.paths import find_eval_bundle

    check_task_selection(spec.eval, base.root)  # a typo in the CORE tasks fails here, not in the worker
    if all_tags:
        spec = with_saved_variants(spec)  # variants given with --variants on `rlab continue` count too
        tags = [t for t in _all_tags(spec) if base.checkpoint_dir(t).is_dir()]
        if not tags:
            raise CheckpointError(
                f"No trained variant of experiment '{spec.experiment}' under {base.checkpoints_root}.",
                "Run `rlab continue` first, or name a tag with --tag.",
            )
    else:
        tags = [tag]  # type: ignore[list-item]
    configs = []
    for name in tags:
        ckpt_dir = base.checkpoint_dir(name)
        if not ckpt_dir.is_dir():
            available = list_tags(base)
            if not available:
                raise CheckpointError(
                    f"Tag '{name}' not found: {base.checkpoints_root} has no checkpoints.",
                    "Check --base-dir, or run `rlab continue` first.",
                )
            unknown = unknown_name_error("tag", name, available, CheckpointError)
            raise CheckpointError(f"{unknown.message} (in {base.checkpoints_root})", "See `rlab ls`.")
        steps = checkpoint_steps(ckpt_dir)
        if step is not None and step not in steps:
            raise CheckpointError(
                f"No checkpoint for step {step} in {ckpt_dir} (found: "
                f"{', '.join(map(str, steps)) or 'none'}).",
                "Choose one with --step.",
            )
        tag_meta = meta if name == tag and meta else _newest_meta(ckpt_dir)
        if name == spec.base.tag:  # the base itself: a reference arm, at the step the variants started from
            configs.append(
                plan_eval(
                    spec, name, variant="base", step=step if step is not None else spec.base.step
                ).model_copy(update={"force": force})
            )
            continue
        configs.append(
            plan_eval(spec, name, variant=(tag_meta or {}).get("variant"), step=step).model_copy(
                update={"force": force}
            )
        )
    if "core" in spec.eval.evals and find_eval_bundle(base.root, spec.eval.core_bundle) is None:
        missing = no_bundle_error(base.root)  # said here, with how to get one, not in the worker
        if not dry_run:
            raise EvalError(missing.message, f"{missing.hint} Or leave CORE out: --no-core.")
        err.print(f"[yellow]{missing.message}[/] {missing.hint}", highlight=False)
    nproc = nproc or spec.launch.nproc_per_node or max(1, len(visible_gpus()))
    layout = experiment_layout(spec)
    if not dry_run:
        require_writable_results(layout.root)
    failed: list[tuple[str, tuple[str, str | None] | None]] = []
    report: list[dict[str, Any]] = []
    with human_lines_to_stderr() if as_json else contextlib.nullcontext():
        if not dry_run:
            _ensure_long_docs(spec, base.root)
        for index, cfg in enumerate(configs):
            path = layout.eval_run_config(cfg.tag)
            argv = _eval_argv(spec, path, nproc, index, cfg.tag, resolve=not dry_run)
            report.append(
                {
                    "tag": cfg.tag,
                    "step": cfg.step,
                    "evals": list(cfg.eval.evals),
                    "out_dir": str(cfg.out_dir),
                    "eval_json": str(layout.eval_json(cfg.tag)),
                    "log": str(layout.eval_log(cfg.tag)),
                    "command": argv,
                }
            )
            if dry_run:
                report[-1]["config"] = cfg.model_dump(mode="json")
                if not as_json:
                    out.print(
                        f"{cfg.tag}: {cfg.model_dump_json()}", highlight=False, markup=False, soft_wrap=True
                    )
                    out.print(f"  {format_command(argv)}", highlight=False, markup=False, soft_wrap=True)
                continue
            write_config(cfg, path)
            ok, error = _run_one(cfg, argv, layout)
            report[-1]["ok"] = ok
            if not ok:
                report[-1]["error"] = error[0] if error else None
                failed.append((cfg.tag, error))
    if as_json:
        typer.echo(json.dumps({"dry_run": dry_run, "tags": report}, indent=2))
    if len(failed) == 1 and failed[0][1] is not None:  # the worker's own message, as if raised here
        raise EvalError(f"{failed[0][0]}: {failed[0][1][0]}", failed[0][1][1])
    if failed:
        tags = [t for t, _ in failed]
        raise EvalError(
            f"Eval failed for {', '.join(tags)}; log: {layout.eval_log(tags[0])}.",
            f"Rerun it with: {_rerun_command(tags[0])}",
        )
    if not dry_run and not as_json:
        out.print(
            f"next: rlab report -e {spec.experiment}"
            + (f" --results-dir {results_dir}" if results_dir else ""),
            highlight=False,
            markup=False,
        )


def _rerun_command(tag: str) -> str:
    """The command the user typed, for just `tag` (their flags kept; --all and other --tag values dropped)."""
    import shlex
    import sys

    args, kept, skip = sys.argv[1:], [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--tag", "-t"):
            skip = True
        elif arg != "--all" and not arg.startswith("--tag="):
            kept.append(arg)
    if not kept or kept[0] != "eval":
        kept = ["eval", *kept]
    return shlex.join(["rlab", kept[0], "--tag", tag, *kept[1:]])


def _eval_argv(
    spec: ExperimentSpec, path: Path, nproc: int, index: int, tag: str, *, resolve: bool
) -> list[str]:
    from rlab.orchestrate.launch import EVAL_MODULE, python_argv, resolve_program, torchrun_argv

    if nproc <= 1:
        return python_argv(path, EVAL_MODULE)
    launch = spec.launch.model_copy(
        update={
            "nproc_per_node": nproc,
            "gpus_per_variant": None,
            "nnodes": 1,
            "node_rank": 0,
            "rdzv_endpoint": None,
            "max_restarts": 0,
        }
    )
    if resolve:
        launch = launch.model_copy(update={"torchrun": resolve_program(launch.torchrun)})
    return torchrun_argv(path, launch, index=index, rdzv_id=f"eval-{tag}", module=EVAL_MODULE)


def _run_one(
    cfg: EvalRunConfig, argv: list[str], layout: ExperimentLayout
) -> tuple[bool, tuple[str, str | None] | None]:
    """Run one tag's eval worker; (ok, (message, hint) the worker reported or None)."""
    from rlab.cli.console import err, out
    from rlab.cli.eval_progress import EvalProgressView, keep_in_log
    from rlab.orchestrate.launch import run_streaming
    from rlab.orchestrate.launcher_noise import LauncherNoiseFilter
    from rlab.orchestrate.watch import tail_lines, worker_error
    from rlab.worker import ERROR_FILE_ENV, read_error_file

    log_path = layout.eval_log(cfg.tag)
    log_path.unlink(missing_ok=True)  # one log per run: a failure summary never shows an older run's lines
    error_file = layout.eval_dir(cfg.tag) / ".worker_error.json"
    error_file.unlink(missing_ok=True)
    out.print(f"[bold]{cfg.tag}[/]: evals {', '.join(cfg.eval.evals)} -> {cfg.out_dir}", highlight=False)

    view = EvalProgressView(err) if err.is_terminal else None  # else the worker logs every 10%
    noise = LauncherNoiseFilter()  # torchrun's own lines stay in eval.log only

    def echo(line: str) -> None:
        if (view is None or not view.handle(line)) and noise.keep(line):
            err.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)

    try:
        with view or contextlib.nullcontext():
            code = run_streaming(
                argv,
                log_path,
                env={ERROR_FILE_ENV: str(error_file), **(view.env if view else {})},
                on_line=echo,
                keep_in_log=keep_in_log,
            )
    except KeyboardInterrupt:
        raise EvalError(
            f"Interrupted: the eval of {cfg.tag} was stopped (no processes left).",
            f"Rerun it with: rlab eval --tag {cfg.tag}",
        ) from None
    if code != 0:
        reported = read_error_file(error_file)
        error_file.unlink(missing_ok=True)
        if reported is None:
            err.print(f"[red]{cfg.tag}: eval exited with code {code}; log: {log_path}[/]", highlight=False)
            reason = worker_error(log_path)  # the worker's own line, not torchrun's box at the log's end
            for line in [reason] if reason else tail_lines(log_path, 10):
                err.print(f"  {line}", markup=False, highlight=False)
        return False, reported
    summary = _summary(layout.eval_json(cfg.tag))
    out.print(f"[green]{cfg.tag}: done[/] {summary}", highlight=False)
    return True, None


def _summary(path: Path) -> str:
    from rlab.records import ContractError, read_eval_doc

    try:
        metrics = read_eval_doc(path).metrics
    except ContractError as exc:
        return f"({exc.message})"
    parts = []
    if metrics.bpb is not None and metrics.bpb.val is not None:
        parts.append(f"val bpb {metrics.bpb.val.bpb:.4f}")
    if metrics.core is not None:
        parts.append(f"{metrics.core.label} {metrics.core.core:.4f}")
    if metrics.passkey is not None:
        parts.append(f"passkey {metrics.passkey.overall:.2f}")
    if metrics.ruler is not None and metrics.ruler.by_length:
        scores = [r.score for r in metrics.ruler.by_length]
        parts.append(f"RULER-style {sum(scores) / len(scores):.2f}")
    return ", ".join(parts) + f" ({path})"


def _ensure_long_docs(spec: ExperimentSpec, base_root: Path) -> None:
    """Build the base dir's long-document set before the workers start, when an eval needs it and it is missing."""
    if not {"bpb_length", "ruler"} & set(spec.eval.evals):
        return
    from rlab.cli.console import out
    from rlab.data.long_docs import ensure_long_docs, read_long_docs_manifest
    from rlab.evals.lengths import experiment_target_len, longest_bpb_length

    if read_long_docs_manifest(base_root) is not None:
        return
    min_tokens = longest_bpb_length(spec.eval, experiment_target_len(spec))
    out.print(
        f"No long-document set in {base_root}: building it from the default sources for this tokenizer "
        f"(documents of >= {min_tokens:,} tokens; shards and tokenizer are not touched) ...",
        highlight=False,
    )
    manifest, _ = ensure_long_docs(base_root, min_tokens)
    out.print(
        f"long-document set: {len(manifest.docs)} documents, {manifest.total_tokens:,} tokens "
        f"(sha256 {manifest.set_sha256[:12]}); `rlab data long-docs` rebuilds it.",
        highlight=False,
    )


def _newest_meta(ckpt_dir: Path) -> dict | None:
    from rlab.orchestrate.clone import checkpoint_steps

    steps = checkpoint_steps(ckpt_dir)
    if not steps:
        return None
    try:
        return json.loads(meta_file(ckpt_dir, steps[-1]).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _all_tags(spec: ExperimentSpec) -> list[str]:
    """The tags `--all` evaluates: the spec's, plus those `rlab continue` made from the experiment's saved
    resolved spec (its --seeds and --zero-shot are there, not in the spec file)."""
    from rlab.orchestrate.plan import experiment_layout, experiment_tags
    from rlab.spec.loading import load_spec

    tags = experiment_tags(spec)
    saved = experiment_layout(spec).resolved_spec
    if saved.exists():
        try:
            train = load_spec(saved, resolve=False).train
        except Exception:  # an unreadable saved spec adds nothing; the spec given still works
            train = None
        if train is not None:
            update = {
                "seeds": max(train.seeds, spec.train.seeds),
                "zero_shot": train.zero_shot or spec.train.zero_shot,
                "steps": train.steps,
            }
            tags = (
                experiment_tags(spec.model_copy(update={"train": spec.train.model_copy(update=update)}))
                + tags
            )
    return list(dict.fromkeys(tags))


def _resolve_spec(
    spec_path, tag, *, experiment, base_dir, base_tag, results_dir
) -> tuple[ExperimentSpec, dict | None]:
    """The spec to evaluate with: --spec; else the experiment's saved resolved spec; else defaults.

    Without --spec, the tag's checkpoint meta says which experiment and base it belongs to.
    """
    from rlab.orchestrate.plan import base_layout
    from rlab.spec.loading import load_spec

    named = dict(base_dir=base_dir, results_dir=results_dir, name=experiment, base_tag=base_tag)
    if spec_path is not None:
        return load_spec(spec_path, **named), None
    meta = None
    if tag is not None:
        probe = load_spec(None, base_dir=base_dir, results_dir=results_dir)
        meta = _newest_meta(base_layout(probe).checkpoint_dir(tag))
    if meta is not None:
        run_config = meta.get("run_config") or {}
        experiment = experiment or run_config.get("experiment")
        lineage = meta.get("lineage") or {}
        named["base_tag"] = base_tag or lineage.get("parent_tag") or (tag if not lineage else None)
        named["name"] = experiment
    if experiment is not None:
        saved = ExperimentLayout(results_dir or default_results_root(), experiment).resolved_spec
        if saved.exists():
            return load_spec(saved, **named), meta
    if tag is None:
        raise SpecError("--all needs --spec or --experiment (whose resolved spec lists the variants).")
    return load_spec(None, **named), meta


def _apply_eval_flags(spec: ExperimentSpec, **flags) -> ExperimentSpec:
    from rlab.spec.loading import parse_names

    data = spec.eval.model_dump(mode="json")
    evals = list(data["evals"])
    for name in ("bpb", "bpb_length", "core", "passkey", "ruler"):
        value = flags[name]
        if value is True and name not in evals:
            evals.append(name)
        elif value is False and name in evals:
            evals.remove(name)
    data["evals"] = evals
    if flags["lengths"] is not None:
        try:
            data["lengths"] = [int(x) for x in parse_names(flags["lengths"])]
        except ValueError:
            raise SpecError(
                f"--lengths: expected comma-separated integers (got {flags['lengths']!r})."
            ) from None
    if flags["max_per_task"] is not None:
        data["max_per_task"] = flags["max_per_task"]
    if flags["eval_bundle"] is not None:
        data["core_bundle"] = str(flags["eval_bundle"])
    if flags["tasks"] is not None:
        if flags["core"] is False:
            raise SpecError("--tasks picks CORE tasks, --no-core turns CORE off.", "Give one of them.")
        data["core_tasks"] = parse_names(flags["tasks"])
        if "core" not in evals:
            evals.append("core")
    from pydantic import ValidationError

    from rlab.spec.eval import EvalSpec
    from rlab.spec.loading import format_validation_error

    try:
        new_eval = EvalSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, "eval flags").replace("  ", "  eval.")) from None
    if not new_eval.evals:
        raise SpecError(
            "No evals left to run.", "Enable one with --bpb, --bpb-length, --core, --passkey or --ruler."
        )
    return spec.model_copy(update={"eval": new_eval})
