"""The eval sequence of `rlab eval`: resolve -> run -> summarise.

    plan = plan_evals(EvalRequest(tag="d20-pi"))     # rlab.orchestrate.eval_plan
    outcomes = run_evals(plan, reporter)              # each worker in turn, output to eval.log
    raise_for_failures(plan, outcomes)                # the worker's own error, or the rerun command

`run_evals` writes each tag's eval_run.json and runs `python -m rlab.evals` on it (under torchrun when
nproc > 1), telling a `Reporter` what happens: the worker's lines (torchrun's own stay in eval.log),
its progress events, and each tag's headline numbers when it is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rlab.errors import EvalError, Interrupted
from rlab.evals import catalog
from rlab.evals.lengths import experiment_target_len, longest_bpb_length
from rlab.evals.progress import PROGRESS_ENV, parse_event
from rlab.orchestrate.eval_plan import EvalPlan
from rlab.orchestrate.launch import run_streaming
from rlab.orchestrate.launcher_noise import LauncherNoiseFilter
from rlab.orchestrate.plan import base_layout
from rlab.orchestrate.reporter import JobFailure, Reporter
from rlab.orchestrate.watch import tail_lines, worker_error
from rlab.paths import ExperimentLayout
from rlab.records.base import ContractError
from rlab.records.eval_doc import read_eval_doc
from rlab.spec.run import write_config
from rlab.worker import ERROR_FILE_ENV, read_error_file

if TYPE_CHECKING:
    from rlab.spec.experiment import ExperimentSpec
    from rlab.spec.run import EvalRunConfig


@dataclass
class EvalOutcome:
    """How one tag's eval ended: `error` is the worker's own (message, hint) when it reported one."""

    tag: str
    ok: bool
    error: tuple[str, str | None] | None = None
    summary: str | None = None


def keep_in_log(line: str) -> bool:
    """Whether a line of the worker's output belongs in eval.log (progress events do not)."""

    return parse_event(line) is None


def run_evals(plan: EvalPlan, reporter: Reporter) -> list[EvalOutcome]:
    """Run every tag's worker in turn (a failure does not stop the next); the results dir must be writable."""
    from rlab.orchestrate.preflight import require_writable_results  # noqa: PLC0415 - defers numpy, torch

    layout = plan.layout
    if plan.refusal is not None:
        raise plan.refusal
    require_writable_results(layout.root)
    ensure_long_docs(plan.spec, base_layout(plan.spec).root, reporter)
    outcomes = []
    for index, cfg in enumerate(plan.configs):
        write_config(cfg, layout.eval_run_config(cfg.tag))
        argv = plan.argv(index, resolve=True)
        outcomes.append(run_one(cfg, argv, layout, reporter, rerun=plan.request.rerun_command(cfg.tag)))
    return outcomes


def run_one(
    cfg: EvalRunConfig, argv: list[str], layout: ExperimentLayout, reporter: Reporter, *, rerun: str
) -> EvalOutcome:
    """Run one tag's eval worker, its output teed to eval.log and its lines (minus torchrun's) reported;
    an interrupt stops it and is raised with `rerun`, the command that runs it again."""

    log_path = layout.eval_log(cfg.tag)
    log_path.unlink(missing_ok=True)  # one log per run: a failure summary never shows an older run's lines
    error_file = layout.eval_dir(cfg.tag) / ".worker_error.json"
    error_file.unlink(missing_ok=True)
    noise = LauncherNoiseFilter()  # torchrun's own lines stay in eval.log only
    events = reporter.wants_progress_events

    def on_line(line: str) -> None:
        event = parse_event(line) if events else None
        if event is not None:
            reporter.eval_progress(cfg.tag, *event)
        elif noise.keep(line):
            reporter.worker_line(cfg.tag, line)

    env = {ERROR_FILE_ENV: str(error_file), **({PROGRESS_ENV: "events"} if events else {})}
    try:
        with reporter.evaluating(cfg.tag, cfg.eval.evals, cfg.out_dir):
            code = run_streaming(argv, log_path, env=env, on_line=on_line, keep_in_log=keep_in_log)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (rlab.errors.Terminated)
        raise Interrupted(
            f"Interrupted: the eval of {cfg.tag} was stopped (no processes left).",
            f"Rerun it with: {rerun}",
            cause=exc,
        ) from None
    if code != 0:
        reported = read_error_file(error_file)
        error_file.unlink(missing_ok=True)
        if reported is None:
            reporter.eval_failed(
                JobFailure(cfg.tag, code, log_path, worker_error(log_path), tail_lines(log_path, 10))
            )
        return EvalOutcome(cfg.tag, ok=False, error=reported)
    summary = eval_summary(layout.eval_json(cfg.tag))
    reporter.eval_finished(cfg.tag, summary, layout.eval_json(cfg.tag))
    return EvalOutcome(cfg.tag, ok=True, summary=summary)


def raise_for_failures(plan: EvalPlan, outcomes: list[EvalOutcome]) -> None:
    """One failed tag with the worker's own reason: that error, as if raised here; else which tags failed."""
    failed = [o for o in outcomes if not o.ok]
    if len(failed) == 1 and failed[0].error is not None:
        message, hint = failed[0].error
        raise EvalError(f"{failed[0].tag}: {message}", hint)
    if failed:
        tags = [o.tag for o in failed]
        raise EvalError(
            f"Eval failed for {', '.join(tags)}; log: {plan.layout.eval_log(tags[0])}.",
            f"Rerun it with: {plan.request.rerun_command(tags[0])}",
        )


def eval_summary(path: Path) -> str:
    """The headline numbers of an eval.json in one line: each section's `headline` (val BPB, CORE, ...)."""

    try:
        metrics = read_eval_doc(path).metrics
    except ContractError as exc:
        return f"({exc.message})"
    sections = [metrics.get(name) for name in metrics.present()]
    parts = [line for s in sections if s is not None and (line := s.headline()) is not None]
    return ", ".join(parts) + f" ({path})"


def ensure_long_docs(spec: ExperimentSpec, base_root: Path, reporter: Reporter) -> None:
    """Build the base dir's long-document set before the workers start, when an eval needs it and it is missing."""
    if not catalog.needing("long_docs", spec.eval.evals):
        return
    from rlab.data.long_docs import ensure_long_docs as build  # noqa: PLC0415 - defers numpy
    from rlab.data.long_docs import read_long_docs_manifest  # noqa: PLC0415 - defers numpy

    if read_long_docs_manifest(base_root) is not None:
        return
    min_tokens = longest_bpb_length(spec.eval, experiment_target_len(spec))
    reporter.info(
        f"No long-document set in {base_root}: building it from the default sources for this tokenizer "
        f"(documents of >= {min_tokens:,} tokens; shards and tokenizer are not touched) ..."
    )
    manifest, _ = build(base_root, min_tokens)
    reporter.info(
        f"long-document set: {len(manifest.docs)} documents, {manifest.total_tokens:,} tokens "
        f"(sha256 {manifest.set_sha256[:12]}); `rlab data long-docs` rebuilds it."
    )
