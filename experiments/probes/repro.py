"""Probe: do the demo's verdicts survive other numerics (the training dtype, the intra-op thread count)?

A rerun of the demo on another machine computes in other numerics: `dtype: auto` trains in bf16 autocast where
the CPU has native bf16 and in fp32 elsewhere, and kernels and thread counts sum in another order. The digits
move (issue 45: a few percent after training); the verdicts should not. This probe reruns the demo's continue,
eval and report stages (the same commands `rlab demo` runs, on its base and data) as the experiment `demo-repro`,
trained in the other dtype than the demo's own and with `--threads` intra-op threads per rank (torchrun's
default, the demo's, is 1), then counts the verdicts that changed between results/demo/results.csv and
results/demo-repro/results.csv (`rlab.report.assemble.verdict_diff`): the figure docs/reproducibility.md states.

    make demo                                                   # the reference: results/demo
    .venv/bin/python experiments/probes/repro.py                # the other dtype, 2 threads per rank
    .venv/bin/python experiments/probes/repro.py --threads 1    # the other dtype alone
    .venv/bin/python experiments/probes/repro.py --count-only   # count again from the results on disk

It prints each changed verdict (those to or from better/worse first) and, last, one JSON line: the counts, both
conditions and the stage times. The base is shared: a rerun on another machine also pretrains its own base, which
this probe does not, so here the zero-shot arms and the base differ only by the eval's numerics (fp32 on a CPU
either way; threads); the continued arms carry the whole training difference.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rlab.errors import RlabError
from rlab.orchestrate.demo import DEMO_SPEC, Stage, demo_stages
from rlab.paths import ExperimentLayout, find_eval_bundle
from rlab.records.eval_doc import read_eval_doc
from rlab.report.assemble.verdict_diff import VerdictDiff, verdict_diff
from rlab.spec.loading import load_spec

NAME = "demo-repro"
OTHER_DTYPE = {"bfloat16": "float32", "float32": "bfloat16"}
RERUN_STAGES = ("continue", "eval", "report")


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def train_dtypes(layout: ExperimentLayout) -> list[str]:
    """The dtypes the experiment's checkpoints were trained in (eval.json): one for the demo; two for the rerun,
    whose base and zero-shot arms keep the base's."""
    docs = [read_eval_doc(p) for p in sorted(layout.root.glob("evals/*/eval.json"))]
    return sorted({d.checkpoint.train_dtype for d in docs if d.checkpoint.train_dtype})


def trained_dtype(layout: ExperimentLayout) -> str:
    """The one dtype the experiment's checkpoints were trained in; an error when none or several."""
    found = train_dtypes(layout)
    if len(found) != 1:
        raise RlabError(
            f"{layout.root}: {'no' if not found else 'several'} training dtype(s) in its eval.json "
            f"({', '.join(found) or 'none recorded'}); the probe needs one to rerun in the other.",
            "Regenerate the demo first: make demo.",
        )
    return found[0]


def rerun_spec(demo: dict, name: str, dtype: str) -> dict:
    """The demo's spec as experiment `name` (own tags, own results), continued in `dtype`."""
    spec = copy.deepcopy(demo)
    spec["name"] = name
    spec.setdefault("train", {})["dtype"] = dtype
    return spec


def check_reference(reference: ExperimentLayout, spec: Path) -> None:
    """The reference must be this spec's demo (same seeds and evals), or the verdicts would differ by design."""
    if not reference.resolved_spec.is_file():
        raise RlabError(f"No demo results at {reference.root}.", "Run the demo first: make demo.")
    ran, wanted = load_spec(reference.resolved_spec), load_spec(spec)
    if ran.train.seeds != wanted.train.seeds or ran.eval != wanted.eval:
        raise RlabError(
            f"{reference.root} was made by another demo spec (seeds {ran.train.seeds} vs {wanted.train.seeds}, "
            f"evals {'alike' if ran.eval == wanted.eval else 'different'}).",
            "Regenerate the demo with this checkout's spec first: make demo.",
        )


def rerun_stages(spec: Path, base_dir: Path, results_dir: Path) -> list[Stage]:
    """continue, eval and report as `rlab demo` runs them, on `spec`."""
    bundle = find_eval_bundle(base_dir)
    stages = demo_stages(spec=spec, base_dir=base_dir, results_dir=results_dir, eval_bundle=bundle)
    return [s for s in stages if s.name in RERUN_STAGES]


def run_stages(stages: list[Stage], threads: int) -> dict[str, float]:
    """Each stage with `threads` intra-op threads per process (torchrun keeps an OMP_NUM_THREADS it is given)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    seconds = {}
    for stage in stages:
        assert stage.argv is not None
        say(f"== {stage.name}: {' '.join(stage.argv)}")
        start = time.perf_counter()
        if subprocess.call(stage.argv, env=env) != 0:
            raise RlabError(f"Stage {stage.name} failed.", f"Rerun it alone: {' '.join(stage.argv)}")
        seconds[stage.name] = round(time.perf_counter() - start, 1)
    return seconds


def summary(diff: VerdictDiff, reference: str, rerun: str) -> list[str]:
    """The lines the probe prints: the count, then each change (to or from better/worse first)."""
    ordered = sorted(diff.changes, key=lambda c: not c.directional)
    return [f"{reference} -> {rerun}: {diff.summary()}"] + [f"  {c.sentence()}" for c in ordered]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-dir", type=Path, default=Path(".cache/demo"), help="The demo's base dir.")
    parser.add_argument("--results-dir", type=Path, default=Path("results"), help="The demo's results root.")
    parser.add_argument(
        "--spec", type=Path, default=DEMO_SPEC, help="The demo spec (default experiments/demo.yaml)."
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="Intra-op threads per rank in the rerun (demo: 1)."
    )
    parser.add_argument("--dtype", choices=sorted(OTHER_DTYPE), help="Rerun dtype (default: the other one).")
    parser.add_argument("--count-only", action="store_true", help="Only count, from the results on disk.")
    args = parser.parse_args(argv)

    base_dir, results_dir = args.base_dir.resolve(), args.results_dir.resolve()
    demo = yaml.safe_load(args.spec.read_text(encoding="utf-8"))
    reference = ExperimentLayout(results_dir, load_spec(args.spec).experiment)
    rerun = ExperimentLayout(results_dir, NAME)
    seconds: dict[str, float] = {}
    if not args.count_only:
        check_reference(reference, args.spec)
        dtype = args.dtype or OTHER_DTYPE[trained_dtype(reference)]
        spec_path = rerun.root / "repro.yaml"  # kept beside the results, so a stage can be rerun by hand
        spec_path.parent.mkdir(parents=True, exist_ok=True)
        spec_path.write_text(yaml.safe_dump(rerun_spec(demo, NAME, dtype), sort_keys=False), encoding="utf-8")
        seconds = run_stages(rerun_stages(spec_path, base_dir, results_dir), args.threads)
    diff = verdict_diff(reference.results_csv, rerun.results_csv)
    say("\n".join(summary(diff, reference.experiment, rerun.experiment)))
    conditions = {
        lay.experiment: {"train_dtypes": train_dtypes(lay), "threads": _threads(lay)}
        for lay in (reference, rerun)
    }
    say(
        json.dumps(
            {
                "compared": diff.compared,
                "changed": len(diff.changes),
                "changed_to_or_from_better_worse": len(diff.directional),
                "only_one": diff.only_one,
                "conditions": conditions,
                "seconds": seconds,
                "changes": [c.sentence() for c in diff.changes],
            }
        )
    )
    return 0


def _threads(layout: ExperimentLayout) -> list[int]:
    """The intra-op thread counts its continued checkpoints were trained with (eval.json's platform)."""
    docs = [read_eval_doc(p) for p in sorted(layout.root.glob("evals/*/eval.json"))]
    return sorted({d.checkpoint.train_platform.threads for d in docs if d.checkpoint.train_platform})


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RlabError as exc:  # one line and a hint, as rlab's own commands say it
        sys.exit(f"error: {exc.message}\n{exc.hint or ''}".rstrip())
