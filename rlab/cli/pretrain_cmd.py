"""`rlab pretrain`: train the spec's `pretrain:` base model from scratch into the base tag, under torchrun.

    rlab pretrain --spec experiments/demo.yaml                # the demo's tiny base at 256 tokens
    rlab pretrain --spec experiments/smoke.yaml --steps 4 --base-dir /tmp/smoke
    rlab pretrain --spec experiments/demo.yaml --seeds 3      # base replicates d6, d6-seed1, d6-seed2

The base is then what `rlab continue` clones for every variant; with `--seeds S` (or train.replicate_base,
which makes one base per train.seeds) it trains S bases, base i with pretrain.train.seed + i, and a
continue with train.replicate_base starts seed replicate i from base i. Launching and watching are
the same as for `rlab continue` (`rlab.orchestrate.training`: one torchrun job, output in
runs/<base tag>/train.log).
"""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator) are local to the command, so `rlab --help` stays
# fast; its signature names only typer and option aliases.
from typing import Annotated, Optional

from rlab.cli.options import (
    BaseDirOpt,
    BaseTagOpt,
    DryRunOpt,
    ForceOpt,
    MaxRestartsOpt,
    NprocOpt,
    ResultsDirOpt,
    ResumeOpt,
    SpecOpt,
    number,
    spec_overrides,
)


def pretrain(
    spec_path: SpecOpt = None,
    base_tag: BaseTagOpt = None,
    base_dir: BaseDirOpt = None,
    results_dir: ResultsDirOpt = None,
    steps: Annotated[
        Optional[int], number("--steps", low=1, help="Steps (spec: pretrain.train.steps).")
    ] = None,
    seeds: Annotated[
        Optional[int],
        number(
            "--seeds",
            low=1,
            metavar="S",
            help="Base replicates <base>, <base>-seed1, ..., base i seeded pretrain seed + i (pretrain.train.seeds).",
        ),
    ] = None,
    nproc: NprocOpt = None,
    max_restarts: MaxRestartsOpt = None,
    dry_run: DryRunOpt = False,
    resume: ResumeOpt = False,
    force: ForceOpt = False,
) -> None:
    """Train the spec's base model from scratch (its `pretrain:` section) into the base tag (and its replicates)."""
    flags = dict(locals())  # every flag by its parameter name (nothing else is bound yet)
    from rlab.cli.plan_view import render_plan
    from rlab.cli.reporting import run_reporter
    from rlab.orchestrate.launch import visible_gpus, with_default_nproc
    from rlab.orchestrate.plan import plan_bases
    from rlab.orchestrate.tag_setup import build_jobs
    from rlab.orchestrate.training import start_pretrain
    from rlab.spec.loading import load_spec

    overrides = spec_overrides(flags, steps="pretrain_steps", seeds="pretrain_seeds")
    spec = load_spec(spec_path, launcher="local", **overrides)
    spec = with_default_nproc(spec, visible_gpus())
    runs = plan_bases(spec)
    if dry_run:
        tags = ", ".join(run.tag for run in runs)
        render_plan(spec, runs, build_jobs(spec, runs), title=f"rlab pretrain: {tags} (dry run)")
        return
    start_pretrain(spec, runs, resume=resume, force=force, reporter=run_reporter(as_json=False))
