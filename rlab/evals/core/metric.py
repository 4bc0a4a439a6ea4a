"""The DCLM CORE metric: tasks subsampled, scored across ranks, centered, averaged.

Definition (DCLM, arXiv 2406.11794, as nanochat evaluates it, so numbers are comparable):

* Each task's rows are shuffled with `random.Random(1337)`; `max_per_task` keeps the first N
  (a deterministic subsample). Prompts and spans: `rlab.evals.core.prompts`.
* An example is scored by `rlab.evals.core.packed` (or one at a time by `rlab.evals.core.reference`,
  the definition it is tested against); ranks take examples i = rank (mod world) and the verdicts are
  summed across ranks.
* Centered accuracy (acc - b)/(1 - b) with b = random baseline / 100; CORE = mean over tasks.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rlab.evals.core.bundle import CoreBundle, TaskSpec, load_task_data
from rlab.evals.core.packed import score_examples_batched
from rlab.evals.core.prompts import FEWSHOT_SEED, prepare_examples
from rlab.evals.core.reference import evaluate_example, judge
from rlab.evals.progress import ProgressFn, report, stages
from rlab.evals.ranks import all_reduce_sum, rank_and_world

log = logging.getLogger(__name__)

SHUFFLE_SEED = 1337
"""nanochat shuffles each task with this seed before `max_per_task` keeps the first N."""


def subsample(
    rows: list[dict], max_per_task: int | None, seed: int = SHUFFLE_SEED
) -> tuple[list[dict], list[int]]:
    """nanochat's deterministic subsample: shuffle with `seed`, keep the first N.
    Returns the rows and their original line indices."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    if max_per_task is not None and max_per_task > 0:
        order = order[:max_per_task]
    return [rows[i] for i in order], order


@dataclass
class TaskScore:
    correct: list[bool]
    cropped: int
    """Examples with a prompt cropped to the model's context (over all ranks)."""


def evaluate_task(model, tokenizer, task: TaskSpec, rows: list[dict], device, **kwargs) -> list[bool]:
    """Per-example correctness over `rows` (`score_task`'s, without the crop count)."""
    return score_task(model, tokenizer, task, rows, device, **kwargs).correct


def score_task(
    model,
    tokenizer,
    task: TaskSpec,
    rows: list[dict],
    device,
    *,
    source_indices: Sequence[int] | None = None,
    max_seq_len: int | None = None,
    batch_tokens: int = 8192,
    fewshot_seed: int = FEWSHOT_SEED,
    batched: bool = True,
    progress: ProgressFn | None = None,
) -> TaskScore:
    """Per-example correctness over `rows` (already subsampled), and how many were cropped. Under
    torch.distributed each rank scores a strided slice and the results are summed across ranks."""
    import torch

    rank, world = rank_and_world()
    mine = list(range(rank, len(rows), world))
    examples = prepare_examples(
        tokenizer,
        task,
        rows,
        mine,
        source_indices=source_indices,
        max_seq_len=max_seq_len,
        fewshot_seed=fewshot_seed,
    )
    pad_id = tokenizer.bos_token_id
    if batched:
        scores = score_examples_batched(model, examples, pad_id, device, batch_tokens, progress)
        verdicts = [judge(ex, sc) for ex, sc in zip(examples, scores)]
    else:
        verdicts = []
        for ex in examples:
            report(progress, len(verdicts), len(examples))
            verdicts.append(evaluate_example(model, ex, pad_id, device))
        report(progress, len(verdicts), len(examples))
    counts = torch.zeros(len(rows) + 1, dtype=torch.float32, device=device)  # per-example correct, then crops
    for i, ok in zip(mine, verdicts):
        counts[i] = float(ok)
    counts[-1] = float(sum(ex.cropped for ex in examples))
    values = all_reduce_sum(counts).tolist()
    return TaskScore(correct=[bool(v) for v in values[:-1]], cropped=int(values[-1]))


# ----------------------------------------------------------------------------- aggregation


def centered_accuracy(accuracy: float, baseline_percent: float) -> float:
    """(acc - b) / (1 - b) with b = baseline_percent / 100: 0 = random guessing, 1 = perfect."""
    b = 0.01 * baseline_percent
    return (accuracy - b) / (1.0 - b)


@dataclass
class TaskResult:
    task: TaskSpec
    correct: list[bool]
    source_indices: list[int]
    cropped: int = 0

    @property
    def n(self) -> int:
        return len(self.correct)

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / self.n if self.n else float("nan")

    @property
    def centered(self) -> float:
        return centered_accuracy(self.accuracy, self.task.baseline)


@dataclass
class CoreResult:
    tasks: list[TaskResult]
    missing: list[TaskSpec] = field(default_factory=list)
    selection: list[str] | None = None
    """The labels asked for when a subset of the bundle was (None: all of them)."""
    bundle_tasks: int | None = None

    def core(self) -> float:
        return sum(t.centered for t in self.tasks) / len(self.tasks) if self.tasks else float("nan")

    def cropped(self) -> int:
        """Examples whose prompt was cropped to the model's context, over every task."""
        return sum(t.cropped for t in self.tasks)

    def metrics(self) -> dict:
        """The `core` section of eval.json (`rlab.evals.core.records.CoreMetric`; baselines as fractions)."""
        return {
            "core": self.core(),
            "partial": bool(self.missing),
            "missing_tasks": [t.label for t in self.missing],
            "selection": self.selection,
            "bundle_tasks": self.bundle_tasks,
            "tasks": {
                t.task.label: {
                    "accuracy": t.accuracy,
                    "centered": t.centered,
                    "baseline": 0.01 * t.task.baseline,
                    "n": t.n,
                    "type": t.task.task_type,
                }
                for t in self.tasks
            },
        }


def evaluate_core(
    model,
    tokenizer,
    bundle: CoreBundle,
    device,
    *,
    max_per_task: int | None = None,
    max_seq_len: int | None = None,
    batch_tokens: int = 8192,
    fewshot_seed: int = FEWSHOT_SEED,
    labels: Sequence[str] | None = None,
    batched: bool = True,
    on_task: Callable[[TaskResult], None] | None = None,
    progress: ProgressFn | None = None,
) -> CoreResult:
    """CORE over the bundle's present tasks (or `labels`); missing task files are carried into
    the result (partial) rather than dropped. `progress` counts examples over all tasks."""
    tasks = list(bundle.tasks) if labels is None else [bundle.task(lbl) for lbl in labels]
    missing = [t for t in bundle.missing if labels is None or t.label in labels]
    runnable = [t for t in tasks if t not in bundle.missing]
    data = [subsample(load_task_data(task), max_per_task) for task in runnable]
    results: list[TaskResult] = []
    for task, (rows, order), part in zip(runnable, data, stages(progress, [len(rows) for rows, _ in data])):
        score = score_task(
            model,
            tokenizer,
            task,
            rows,
            device,
            source_indices=order,
            max_seq_len=max_seq_len,
            batch_tokens=batch_tokens,
            fewshot_seed=fewshot_seed,
            batched=batched,
            progress=part,
        )
        result = TaskResult(task=task, correct=score.correct, source_indices=order, cropped=score.cropped)
        log.info(
            "CORE %s: accuracy %.4f centered %.4f (n=%d)",
            task.label,
            result.accuracy,
            result.centered,
            result.n,
        )
        results.append(result)
        if on_task is not None:
            on_task(result)
    return CoreResult(
        tasks=results,
        missing=missing,
        selection=None if labels is None else list(labels),
        bundle_tasks=len(bundle.labels),
    )
