"""Reading the DCLM CORE eval bundle in nanochat's layout.

A bundle is a folder with::

    core.yaml                 icl_tasks: label, dataset_uri, num_fewshot, icl_task_type, continuation_delimiter
    eval_meta_data.csv        one row per task; rlab reads `Eval Task` and `Random baseline` (in percent)
    eval_data/<category>/<task>.jsonl

Tasks whose data file is absent are *reported*, not dropped: `load_bundle` returns them in
`CoreBundle.missing`, the CORE result is then marked partial and names them. A malformed jsonl
line is an `EvalError` naming the file and the line number, so a corrupt download is never scored.

`verify_bundle` checks every task file against the git blob SHA-1 of nanochat's public bundle
(`https://karpathy-public.s3.us-west-2.amazonaws.com/eval_bundle.zip`), so a user can tell a
complete, byte-identical bundle from a partial or modified one.
"""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import json
import logging
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml

from rlab.errors import EvalError, unknown_name_error
from rlab.evals.core.settings import CoreSettings
from rlab.paths import eval_bundle_search, find_eval_bundle

if TYPE_CHECKING:
    from rlab.spec.eval import EvalSpec

log = logging.getLogger(__name__)

TaskType = Literal["multiple_choice", "schema", "language_modeling"]
TASK_TYPES: tuple[str, ...] = ("multiple_choice", "schema", "language_modeling")

# The fields each task type's rows must carry (the ones prompt rendering reads).
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "multiple_choice": ("query", "choices", "gold"),
    "schema": ("context_options", "continuation", "gold"),
    "language_modeling": ("context", "continuation"),
}

# nanochat's default when core.yaml sets no delimiter for a task.
DEFAULT_CONTINUATION_DELIMITER = " "

# git blob SHA-1 (`git hash-object FILE`) of every eval_data file in nanochat's bundle, by
# dataset_uri. Recorded from the bundle's public copies (see tests/fixtures/eval_bundle/SOURCES.md).
NANOCHAT_BUNDLE_BLOBS: dict[str, str] = {
    "language_understanding/hellaswag.jsonl": "448321079fdc140bd8566b16b24eda9ceacd3501",
    "world_knowledge/jeopardy_all.jsonl": "2f771918dbc8b68550df204171b14d2648b5d494",
    "world_knowledge/bigbench_qa_wikidata.jsonl": "5e1be72797ba082fd4f6efa42f7d759d2d23339a",
    "world_knowledge/arc_easy.jsonl": "b5fd1bf87a24246a6be67230b721541688f5c349",
    "world_knowledge/arc_challenge.jsonl": "ce66b8dcfb4bac892a404a0dda8b4e8ed0f84b89",
    "commonsense_reasoning/copa.jsonl": "b22f96e08ae9d0e97e1ae58f67b6425c77ef200a",
    "commonsense_reasoning/commonsense_qa.jsonl": "f1cc16a88b05ab0934aab2ec2d02a6869e6e5520",
    "commonsense_reasoning/piqa.jsonl": "a9992adfdefde366fe7ccff871f5aa62449a09cf",
    "commonsense_reasoning/openbook_qa.jsonl": "a8aff255a64cbc72a85252acf00df25a315686c2",
    "language_understanding/lambada_openai.jsonl": "4da02dd53b9e7385871d06ab855471d77b2f7dda",
    "language_understanding/winograd_wsc.jsonl": "762fe030ac6938ecba438c47a04057247c6ab891",
    "language_understanding/winogrande.jsonl": "316e87ae4659f0c402b0f00551fdec83ab0a0986",
    "symbolic_problem_solving/bigbench_dyck_languages.jsonl": "27a4ac2b3b18716add92f4ecd62475c4f8d77768",
    "symbolic_problem_solving/agi_eval_lsat_ar.jsonl": "d663b427ba310d3f877f09a6830198ca7c856189",
    "symbolic_problem_solving/bigbench_cs_algorithms.jsonl": "7ecee0f270f3de8b6558da14ae02181f3d950a40",
    "symbolic_problem_solving/bigbench_operators.jsonl": "a982dc4f962725c9dc4abb07d3cc333c99959290",
    "symbolic_problem_solving/bigbench_repeat_copy_logic.jsonl": "86621f10e7124ed6f3a61fb91493c1256c008f60",
    "reading_comprehension/squad.jsonl": "dc733b8f58ec666c53fd946198c434b819a00680",
    "reading_comprehension/coqa.jsonl": "028bd4e51326cc43f8394987ae47fbb271aeba9d",
    "reading_comprehension/boolq.jsonl": "f42083a58713d00ef4600118cfdf79618c269190",
    "language_understanding/bigbench_language_identification.jsonl": "1f132fbbb12a67ce267b7b92b458175632c265f3",
}

BUNDLE_HINT = (
    "Get nanochat's with `rlab bundle download`, or point $RLAB_EVAL_BUNDLE (or --eval-bundle) at a copy."
)


def no_bundle_error(base_dir: Path) -> EvalError:
    """No bundle named and none found: where rlab looked, and how to get one."""

    looked = " and ".join(str(p) for p in eval_bundle_search(base_dir))
    return EvalError(f"No CORE eval bundle in {looked}.", BUNDLE_HINT)


def bundle_root(base_dir: Path, explicit: Path | None = None) -> Path:
    """The bundle to read (`rlab.paths.find_eval_bundle`), or `no_bundle_error`."""

    root = find_eval_bundle(base_dir, explicit)
    if root is None:
        raise no_bundle_error(base_dir)
    return root


@dataclass(frozen=True)
class TaskSpec:
    """One CORE task as configured in core.yaml, with its random baseline from the meta CSV."""

    label: str
    dataset_uri: str
    task_type: TaskType
    num_fewshot: int
    continuation_delimiter: str
    baseline: float
    """Random-guess accuracy in percent (the meta CSV's `Random baseline`)."""
    path: Path
    """Absolute path of the task's jsonl file (may not exist: see CoreBundle.missing)."""


@dataclass(frozen=True)
class CoreBundle:
    """A parsed bundle: the tasks that can run and the ones whose data file is absent."""

    root: Path
    tasks: tuple[TaskSpec, ...]
    missing: tuple[TaskSpec, ...] = field(default_factory=tuple)
    order: tuple[str, ...] = ()
    """Every label in core.yaml's order."""

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def task(self, label: str) -> TaskSpec:
        for t in self.tasks + self.missing:
            if t.label == label:
                return t

        raise unknown_name_error("CORE task", label, [t.label for t in self.tasks + self.missing], EvalError)

    @property
    def labels(self) -> list[str]:
        """Every task of core.yaml, in its order (data file present or not)."""
        return list(self.order) or [t.label for t in self.tasks + self.missing]


def select_tasks(bundle: CoreBundle, patterns: Sequence[str] | None) -> list[str] | None:
    """The task labels `patterns` (names or shell globs like `arc_*`, lm-eval's `--tasks`) pick, in
    core.yaml's order; None when there is no selection or it picks every task (the full CORE).

    A pattern matching no task is an EvalError with a did-you-mean, so a typo never silently
    shrinks CORE.
    """
    if patterns is None:
        return None

    labels = bundle.labels
    picked: set[str] = set()
    for pattern in patterns:
        hits = [lbl for lbl in labels if fnmatch.fnmatchcase(lbl, pattern)]
        if not hits:
            message = unknown_name_error("CORE task", pattern, labels, EvalError).message
            if any(c in pattern for c in "*?["):
                message = f"No CORE task matches '{pattern}'. Available: {', '.join(sorted(labels))}."
            raise EvalError(message, "List them with `rlab eval --list-tasks`; globs like 'arc_*' work too.")
        picked.update(hits)
    if picked == set(labels):
        return None
    return [lbl for lbl in labels if lbl in picked]


@contextmanager
def quiet_bundle_warnings():
    """Silence this module's missing-file warnings where the caller reports the bundle itself (the worker
    warns when it runs)."""
    saved, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = saved


def check_task_selection(eval_spec: EvalSpec, base_dir: Path) -> list[str] | None:
    """The labels `eval.core_tasks` picks in the bundle the worker will read; an unknown one is an EvalError
    (so a typo fails before a launch, not in the worker). None when CORE is off or runs every task."""
    core = CoreSettings.of(eval_spec)
    if "core" not in eval_spec.evals or core.core_tasks is None:
        return None
    with quiet_bundle_warnings():
        bundle = load_bundle(bundle_root(base_dir, core.core_bundle))
    return select_tasks(bundle, core.core_tasks)


def _read_yaml_tasks(root: Path) -> list[dict]:

    path = root / "core.yaml"
    if not path.is_file():
        raise EvalError(f"CORE bundle {root} has no core.yaml.", BUNDLE_HINT)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise EvalError(f"{path}: not valid YAML: {exc}", BUNDLE_HINT) from None
    tasks = doc.get("icl_tasks") if isinstance(doc, dict) else None
    if not isinstance(tasks, list) or not tasks:
        raise EvalError(f"{path}: expected a non-empty `icl_tasks` list.", BUNDLE_HINT)
    return tasks


def read_baselines(root: Path) -> dict[str, float]:
    """`Eval Task` -> `Random baseline` (percent) from eval_meta_data.csv."""
    path = root / "eval_meta_data.csv"
    if not path.is_file():
        raise EvalError(f"CORE bundle {root} has no eval_meta_data.csv.", BUNDLE_HINT)
    baselines: dict[str, float] = {}
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        if "Eval Task" not in fields or "Random baseline" not in fields:
            raise EvalError(f"{path}: needs the columns 'Eval Task' and 'Random baseline' (found: {fields}).")
        for lineno, row in enumerate(reader, start=2):
            try:
                baselines[row["Eval Task"].strip()] = float(row["Random baseline"])
            except (TypeError, ValueError):
                raise EvalError(
                    f"{path}:{lineno}: 'Random baseline' is not a number ({row['Random baseline']!r})."
                ) from None
    return baselines


def load_bundle(root: Path) -> CoreBundle:
    """Parse core.yaml + eval_meta_data.csv; split tasks into present and missing data files."""
    root = Path(root)
    if not root.is_dir():
        raise EvalError(f"CORE eval bundle not found: {root}", BUNDLE_HINT)
    raw_tasks = _read_yaml_tasks(root)
    baselines = read_baselines(root)
    present: list[TaskSpec] = []
    missing: list[TaskSpec] = []
    for i, raw in enumerate(raw_tasks):
        where = f"{root / 'core.yaml'}: icl_tasks[{i}]"
        try:
            label = str(raw["label"])
            uri = str(raw["dataset_uri"])
            task_type = str(raw["icl_task_type"])
            shots = raw["num_fewshot"]
        except (KeyError, TypeError) as exc:
            raise EvalError(f"{where}: missing key {exc}.") from None
        if task_type not in TASK_TYPES:
            raise EvalError(
                f"{where} ({label}): unsupported icl_task_type '{task_type}' (known: {', '.join(TASK_TYPES)})."
            )
        # nanochat uses the first entry of the num_fewshot list.
        num_fewshot = int(shots[0] if isinstance(shots, list) else shots)
        if label not in baselines:
            raise EvalError(
                f"{where}: task '{label}' has no row in eval_meta_data.csv, so no random baseline."
            )
        spec = TaskSpec(
            label=label,
            dataset_uri=uri,
            task_type=task_type,  # type: ignore[arg-type]
            num_fewshot=num_fewshot,
            continuation_delimiter=str(raw.get("continuation_delimiter", DEFAULT_CONTINUATION_DELIMITER)),
            baseline=baselines[label],
            path=root / "eval_data" / uri,
        )
        (present if spec.path.is_file() else missing).append(spec)
    if missing:
        log.warning(
            "CORE bundle %s: %d task file(s) missing, CORE will be partial: %s",
            root,
            len(missing),
            ", ".join(f"{t.label} ({t.dataset_uri})" for t in missing),
        )
    return CoreBundle(
        root=root,
        tasks=tuple(present),
        missing=tuple(missing),
        order=tuple(str(raw["label"]) for raw in raw_tasks),
    )


def load_task_data(task: TaskSpec) -> list[dict]:
    """Rows of a task's jsonl; a malformed line is an `EvalError` naming file and line number."""
    if not task.path.is_file():
        raise EvalError(f"CORE task '{task.label}': data file missing: {task.path}", BUNDLE_HINT)
    required = REQUIRED_FIELDS[task.task_type]
    rows: list[dict] = []
    with task.path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvalError(
                    f"{task.path}:{lineno}: malformed JSON line ({exc.msg} at column {exc.colno}).",
                    BUNDLE_HINT,
                ) from None
            if not isinstance(row, dict):
                raise EvalError(f"{task.path}:{lineno}: expected a JSON object, got {type(row).__name__}.")
            absent = [k for k in required if k not in row]
            if absent:
                raise EvalError(
                    f"{task.path}:{lineno}: {task.task_type} row lacks field(s) {', '.join(absent)}.",
                    BUNDLE_HINT,
                )
            if "gold" in required:
                options = row["choices"] if task.task_type == "multiple_choice" else row["context_options"]
                if not isinstance(row["gold"], int) or not 0 <= row["gold"] < len(options):
                    raise EvalError(
                        f"{task.path}:{lineno}: gold {row['gold']!r} is not an index into {len(options)} options."
                    )
            rows.append(row)
    if not rows:
        raise EvalError(f"{task.path}: no rows.", BUNDLE_HINT)
    return rows


def git_blob_sha1(path: Path) -> str:
    """The SHA-1 git gives a file (`git hash-object`): sha1(b"blob <size>\\0" + content)."""
    h = hashlib.sha1()
    size = path.stat().st_size
    h.update(f"blob {size}\0".encode())
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class FileCheck:
    """Status of one task data file: ok (byte-identical to nanochat's), modified, missing, or unknown."""

    labels: tuple[str, ...]
    dataset_uri: str
    status: Literal["ok", "modified", "missing", "unknown"]
    """`unknown` = a file rlab has no reference hash for (a custom task)."""


def verify_bundle(root: Path) -> list[FileCheck]:
    """Check every task file of a bundle against nanochat's blob hashes (one entry per file)."""
    bundle = load_bundle(root)
    by_uri: dict[str, list[TaskSpec]] = {}
    for t in bundle.tasks + bundle.missing:
        by_uri.setdefault(t.dataset_uri, []).append(t)
    checks: list[FileCheck] = []
    for uri, tasks in by_uri.items():
        labels = tuple(t.label for t in tasks)
        path = tasks[0].path
        if not path.is_file():
            status = "missing"
        elif uri not in NANOCHAT_BUNDLE_BLOBS:
            status = "unknown"
        else:
            status = "ok" if git_blob_sha1(path) == NANOCHAT_BUNDLE_BLOBS[uri] else "modified"
        checks.append(FileCheck(labels=labels, dataset_uri=uri, status=status))  # type: ignore[arg-type]
    return checks
