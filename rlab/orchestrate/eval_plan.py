"""What `rlab eval` will run: the request (typed flags) resolved into one eval config per tag.

    plan = plan_evals(EvalRequest(tag="d20-pi"))   # spec, one EvalRunConfig + command per tag

The spec to evaluate with is --spec; else the experiment's saved resolved spec, found through the
tag's checkpoint meta; else defaults. The eval flags are named overrides of it (`rlab.spec.loading`), as every
command's are; every tag and step, then each selected eval's own preflight (`EvalDefinition.preflight`), are
checked before anything runs (`rlab.orchestrate.evaluation` runs the plan).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.core.checkpoint_meta import CheckpointMeta, newest_meta
from rlab.errors import CheckpointError, RlabError, SpecError
from rlab.evals import catalog
from rlab.evals.definition import resolve
from rlab.orchestrate.clone import TagFlags, require_checkpoint
from rlab.orchestrate.experiments import resolve_experiment
from rlab.orchestrate.launch import EVAL_MODULE, python_argv, resolve_program, torchrun_argv, visible_gpus
from rlab.orchestrate.plan import base_layout, experiment_layout, experiment_tags, is_base_tag, plan_eval
from rlab.paths import BaseLayout, ExperimentLayout, default_results_root
from rlab.spec.loading import load_spec

if TYPE_CHECKING:
    from rlab.spec.experiment import ExperimentSpec
    from rlab.spec.run import EvalRunConfig

EVAL_TAG = TagFlags("tag", "--tag", "--step", "run `rlab continue` first")
"""How `rlab eval`'s checkpoint errors name a tag and the flags that change it."""


@dataclass(frozen=True)
class EvalRequest:
    """What `rlab eval` was asked, as typed values (None = not given: the spec's or the default). `nproc` is the
    eval workers' own, not a spec override: the spec's launch section is training's (its `gpus_per_variant` may
    exceed an eval's --nproc)."""

    tag: str | None = None
    all_tags: bool = False
    spec_path: Path | None = None
    experiment: str | None = None
    base_dir: Path | None = None
    base_tag: str | None = None
    results_dir: Path | None = None
    step: int | None = None
    switches: dict[str, bool | None] = field(default_factory=dict)
    """Eval name (`rlab.evals.catalog`) -> on/off (`--bpb/--no-bpb`, ...); a missing name is left as the spec has it."""
    lengths: list[int] | None = None
    max_per_task: int | None = None
    tasks: list[str] | None = None
    eval_bundle: Path | None = None
    nproc: int | None = None
    force: bool = False

    def spec_overrides(self) -> dict[str, Any]:
        """The flags that are fields of the spec, as `load_spec`'s named overrides."""
        return dict(
            name=self.experiment,
            base_dir=self.base_dir,
            base_tag=self.base_tag,
            results_dir=self.results_dir,
            lengths=self.lengths,
            max_per_task=self.max_per_task,
            tasks=self.tasks,
            eval_bundle=self.eval_bundle,
            eval_switches=self.switches,
        )

    def rerun_command(self, tag: str) -> str:
        """This request for `tag` alone as a command line, paths absolute (it works from any directory)."""

        args = ["rlab", "eval", "--tag", tag]
        for flag, path in (
            ("--spec", self.spec_path),
            ("--base-dir", self.base_dir),
            ("--results-dir", self.results_dir),
            ("--eval-bundle", self.eval_bundle),
        ):
            if path is not None:
                args += [flag, str(Path(path).expanduser().resolve())]
        for flag, value in (
            ("--experiment", self.experiment),
            ("--base-tag", self.base_tag),
            ("--step", self.step),
            ("--max-per-task", self.max_per_task),
            ("--nproc", self.nproc),
        ):
            if value is not None:
                args += [flag, str(value)]
        for definition in catalog.definitions():
            on = self.switches.get(definition.name)
            if on is not None:
                args.append(f"--{'' if on else 'no-'}{definition.flag}")
        if self.lengths is not None:
            args += ["--lengths", ",".join(map(str, self.lengths))]
        if self.tasks is not None:
            args += ["--tasks", ",".join(self.tasks)]
        if self.force:
            args.append("--force")
        return shlex.join(args)


@dataclass(frozen=True)
class EvalPlan:
    """What `rlab eval` will run: the spec, one config per tag, and the processes per worker."""

    request: EvalRequest
    spec: ExperimentSpec
    configs: list[EvalRunConfig]
    nproc: int
    blockers: tuple[RlabError, ...] = ()
    """What the evals' preflights found that stops a run but not a dry run (no CORE bundle): a dry run says it."""
    refusal: RlabError | None = None
    """The first blocker, with how to leave its eval out: a run raises it before it starts."""

    @property
    def layout(self) -> ExperimentLayout:

        return experiment_layout(self.spec)

    def argv(self, index: int, *, resolve: bool) -> list[str]:
        """The command of the index-th tag's worker (torchrun resolved to its path when `resolve`)."""

        cfg = self.configs[index]
        path = self.layout.eval_run_config(cfg.tag)
        if self.nproc <= 1:
            return python_argv(path, EVAL_MODULE)
        launch = self.spec.launch.model_copy(
            update={
                "nproc_per_node": self.nproc,
                "gpus_per_variant": None,
                "nnodes": 1,
                "node_rank": 0,
                "rdzv_endpoint": None,
                "max_restarts": 0,
            }
        )
        if resolve:
            launch = launch.model_copy(update={"torchrun": resolve_program(launch.torchrun)})
        return torchrun_argv(path, launch, index=index, rdzv_id=f"eval-{cfg.tag}", module=EVAL_MODULE)

    def entry(self, index: int, *, resolve: bool) -> dict[str, Any]:
        """One tag's plan as JSON (what `rlab eval --json` lists)."""
        cfg, layout = self.configs[index], self.layout
        return {
            "tag": cfg.tag,
            "step": cfg.step,
            "evals": list(cfg.eval.evals),
            "out_dir": str(cfg.out_dir),
            "eval_json": str(layout.eval_json(cfg.tag)),
            "log": str(layout.eval_log(cfg.tag)),
            "command": self.argv(index, resolve=resolve),
        }


def plan_evals(request: EvalRequest) -> EvalPlan:
    """Resolve the spec and every tag's eval config; every problem found here, before anything runs."""
    from rlab.orchestrate.tag_setup import with_saved_variants  # noqa: PLC0415 - defers numpy, torch

    if request.tag is None and not request.all_tags:
        raise SpecError(
            "Which tag? rlab eval needs --tag TAG (or --all: every tag of the experiment).",
            "List the tags with `rlab ls`.",
        )
    if request.tag is not None and request.all_tags:
        raise SpecError("--tag and --all contradict each other.", "Give one of them.")
    spec, meta = resolve_eval_spec(request)
    base = base_layout(spec)
    if request.all_tags:
        spec = with_saved_variants(spec)  # variants given with --variants on `rlab continue` count too
        tags = [t for t in experiment_eval_tags(spec) if base.checkpoint_dir(t).is_dir()]
        if not tags:
            raise CheckpointError(
                f"No trained variant of experiment '{spec.experiment}' under {base.checkpoints_root}.",
                "Run `rlab continue` first, or name a tag with --tag.",
            )
    else:
        assert request.tag is not None
        tags = [request.tag]
    configs = [_tag_config(spec, base, name, request, meta if name == request.tag else None) for name in tags]
    blockers = preflight_evals(spec, base)
    nproc = request.nproc or spec.launch.nproc_per_node or max(1, len(visible_gpus()))
    return EvalPlan(request, spec, configs, nproc, tuple(blockers.values()), _refusal(blockers))


def _refusal(blockers: dict[str, RlabError]) -> RlabError | None:
    """The first blocker with how to leave its eval out, or None."""
    if not blockers:
        return None
    name, problem = next(iter(blockers.items()))
    leave_out = f"Or leave it out: --no-{catalog.get(name).flag}."
    return type(problem)(problem.message, f"{problem.hint} {leave_out}" if problem.hint else leave_out)


def preflight_evals(spec: ExperimentSpec, base: BaseLayout) -> dict[str, RlabError]:
    """Each selected eval's own checks (`EvalDefinition.preflight`): what makes the plan wrong is raised, what only
    stops a run (a missing input) is returned by eval name."""
    found = {}
    for definition in catalog.definitions():
        if definition.preflight is not None and definition.name in spec.eval.evals:
            problem = resolve(definition.preflight)(spec.eval, base)
            if problem is not None:
                found[definition.name] = problem
    return found


def _tag_config(
    spec: ExperimentSpec, base: BaseLayout, name: str, request: EvalRequest, meta: CheckpointMeta | None
) -> EvalRunConfig:

    step = request.step
    ckpt_dir = require_checkpoint(base, name, step, EVAL_TAG)
    if is_base_tag(spec, name):  # the base or a replicate of it: a reference arm, at the variants' start step
        cfg = plan_eval(spec, name, variant="base", step=step if step is not None else spec.base.step)
    else:
        tag_meta = meta or newest_meta(ckpt_dir)
        cfg = plan_eval(spec, name, variant=tag_meta.variant if tag_meta is not None else None, step=step)
    return cfg.model_copy(update={"force": request.force})


def experiment_eval_tags(spec: ExperimentSpec) -> list[str]:
    """The tags `--all` evaluates: the spec's, plus those `rlab continue` made from the experiment's saved
    resolved spec (its --seeds and --zero-shot are there, not in the spec file)."""

    tags = experiment_tags(spec)
    saved = experiment_layout(spec).resolved_spec
    if saved.exists():
        try:
            train = load_spec(saved, resolve=False).train
        except SpecError:  # an unreadable or outdated saved spec adds nothing; the spec given still works
            train = None
        if train is not None:
            update = {
                "seeds": max(train.seeds, spec.train.seeds),
                "zero_shot": train.zero_shot or spec.train.zero_shot,
                "replicate_base": train.replicate_base or spec.train.replicate_base,
                "steps": train.steps,
            }
            tags = (
                experiment_tags(spec.model_copy(update={"train": spec.train.model_copy(update=update)}))
                + tags
            )
    return list(dict.fromkeys(tags))


def resolve_eval_spec(request: EvalRequest) -> tuple[ExperimentSpec, CheckpointMeta | None]:
    """The spec to evaluate with: --spec; else the experiment's saved resolved spec; else defaults.

    Without --spec, the tag's checkpoint meta says which experiment and base it belongs to.
    """

    experiment, base_tag = request.experiment, request.base_tag
    named = request.spec_overrides()
    if request.spec_path is not None:
        return load_spec(request.spec_path, **named), None
    meta = None
    if request.tag is not None:
        probe = load_spec(None, base_dir=request.base_dir, results_dir=request.results_dir)
        meta = newest_meta(base_layout(probe).checkpoint_dir(request.tag))
    if meta is not None:
        experiment = experiment or (meta.run_config.experiment if meta.run_config is not None else None)
        lineage = meta.lineage
        named["base_tag"] = base_tag or (lineage.parent_tag if lineage is not None else request.tag)
        named["name"] = experiment
    root = request.results_dir or default_results_root()
    if request.tag is None and experiment is None:  # --all: the experiment as every command finds it
        experiment, root = resolve_experiment(None, None, request.results_dir)
        named["name"] = experiment
    if experiment is not None:
        saved = ExperimentLayout(root, experiment).resolved_spec
        if saved.exists():
            return load_spec(saved, **named), meta
    if request.tag is None:
        raise SpecError(
            f"--all: experiment '{experiment}' has no saved spec under {root} (its spec.resolved.yaml lists the "
            "variants).",
            "Pass --spec FILE, or the --experiment and --results-dir `rlab continue` used.",
        )
    return load_spec(None, **named), meta
