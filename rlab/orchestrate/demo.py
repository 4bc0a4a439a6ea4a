"""The embedded demo as a list of the user's own commands.

`rlab demo` is the mission end to end on the embedded default corpus, on a CPU, in minutes:
prepare the corpus (with copy records mixed into the training text: passages repeated at a
distance, so that a tiny model learns to use long-range context within minutes) and tokenizer,
pretrain a tiny base model at a short context, check that it uses context (go/no-go), continue
it with every variant at 4x the length under torchrun (2 CPU processes, gloo), evaluate each tag,
report. Each stage but the check is exactly the command a user would type, so the demo doubles as
a worked example, and any stage can be rerun by hand.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import rlab
from rlab.data.repeats import RepeatOptions

REPO_ROOT = Path(rlab.__file__).resolve().parents[1]
DEMO_SPEC = REPO_ROOT / "experiments" / "demo.yaml"


@dataclass(frozen=True)
class Stage:
    """One demo stage: a name for the timing table and the argv that runs it."""

    name: str
    argv: list[str] | None
    """None: the go/no-go check, which runs in the demo's own process (rlab.orchestrate.demo_check)."""


def data_is_stale(base_dir: Path) -> bool:
    """True when the demo's base dir holds a corpus prepared without today's copy records (an older demo's)."""

    from rlab.data.prepare import read_manifest  # noqa: PLC0415 - defers numpy

    manifest = read_manifest(base_dir)
    if manifest is None:
        return False
    recorded = ((manifest.get("request") or {}).get("options") or {}).get("copy_records")
    return recorded != asdict(RepeatOptions())


def demo_stages(
    *,
    spec: Path,
    base_dir: Path,
    results_dir: Path,
    eval_bundle: Path | None,
    corpus: list[str] | None = None,
    vocab_size: int | None = None,
    rebuild_data: bool = False,
) -> list[Stage]:
    """The demo's commands, in order. ``--force`` is safe: the demo owns its base dir and its results."""
    rlab_cmd = [sys.executable, "-m", "rlab"]
    where = ["--base-dir", str(base_dir)]
    results = ["--results-dir", str(results_dir)]
    prepare = [*rlab_cmd, "data", "prepare", *where, "--copy-records"]
    for item in corpus or []:
        prepare += ["--corpus", item]
    if vocab_size is not None:
        prepare += ["--vocab-size", str(vocab_size)]
    if rebuild_data:
        prepare.append("--force")
    core = ["--eval-bundle", str(eval_bundle)] if eval_bundle is not None else ["--no-core"]
    return [
        Stage("data", prepare),
        Stage("pretrain", [*rlab_cmd, "pretrain", "--spec", str(spec), *where, *results, "--force"]),
        Stage("check", None),
        Stage("continue", [*rlab_cmd, "continue", "--spec", str(spec), *where, *results, "--force"]),
        # --force: sections of an earlier demo's eval.json that this run does not redo (CORE, in a clone without a
        # bundle) describe the earlier run's checkpoints, which pretrain/continue --force just replaced.
        Stage("eval", [*rlab_cmd, "eval", "--spec", str(spec), "--all", *where, *results, *core, "--force"]),
        Stage(
            "report",
            [*rlab_cmd, "report", "--spec", str(spec), "--results-dir", str(results_dir), "--format", "html"],
        ),
    ]
