"""The files evals, training and the report exchange: one pydantic model per format, written and read through it.

    eval.json           EvalDoc        one per tag; a section per eval, each with how it was measured
    bpb_units.csv       BpbUnit        nats/bytes per unit (a document for train/val, a block for lengths)
    bpb_docs.csv        BpbDoc         the documents train/val BPB scored, by id and text hash
    bpb_by_length.csv   LengthRow      BPB per context length
    passkey.csv         PasskeyCell    accuracy per (length, depth)
    passkey_trials.csv  PasskeyTrial   one row per trial (its own key)
    ruler.csv           RulerCell      RULER-style score per (task, length)
    ruler_trials.csv    RulerTrial     one row per generated example
    core_examples.csv   CoreExample    0/1 outcome per CORE example
    copy_distance.csv   CopyRow        first-occurrence and repeat loss per copy record and window
    results_<v>.csv     CoreTaskRow    CORE per task of one variant
    metrics.jsonl       MetricsRecord  one training record per line (train | eval | done | failed)
    results.csv         ResultsRow     one row per tag: provenance columns, then metric columns

Writers build these models and call `write_eval_doc` / `write_rows` / `MetricsRecord` dumps; the report
reads with `read_eval_doc` / `read_rows` / `read_metrics_records`, so a field exists in exactly one place.
No model carries a confidence interval: intervals are the report's (`rlab.report.uncertainty`), computed
from the units the evals write. Light on purpose: pydantic only (no torch, no pandas).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from rlab.errors import RlabError

EVAL_SCHEMA: Final = "rlab.eval/2"


class ContractError(RlabError):
    """A file does not match its contract (written by an older rlab, truncated, or edited by hand)."""


class Record(BaseModel):
    """Every contract model: unknown keys are errors (a misspelled field never passes silently)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    columns: ClassVar[tuple[str, ...]] = ()
    """A CSV row model's columns, in file order (empty for models that are not CSV rows)."""


# ----------------------------------------------------------------------------- provenance


class CodeVersion(Record):
    """Which code produced a file: the git commit of rlab's checkout and whether it had local changes."""

    package: str
    """rlab's package version."""
    git_sha: str | None = None
    """Full commit SHA of the checkout rlab ran from; null when not run from a git checkout."""
    dirty: bool | None = None
    """True when tracked files differed from that commit."""
    diff_hash: str | None = None
    """sha256 (12 hex) of `git diff HEAD` when dirty: equal hashes mean the same local changes."""

    @property
    def label(self) -> str:
        """`0.1.0` (no checkout), `g1a2b3c4d5e6`, or `g1a2b3c4d5e6+dirty.<diff hash>`."""
        if not self.git_sha:
            return self.package
        return f"g{self.git_sha[:12]}" + (f"+dirty.{self.diff_hash or 'unknown'}" if self.dirty else "")


class SectionRun(Record):
    """How one eval section was measured. Sections of one eval.json may come from different runs."""

    code_version: CodeVersion
    world_size: int
    dtype: str
    """Compute dtype of the forward passes: float32, or bfloat16 under autocast."""
    settings: dict[str, Any]
    """The eval settings this section depends on (see `section_settings`)."""
    settings_hash: str
    data_hash: str | None = None
    """sha256 (12 hex) of what was scored (document ids and text hashes, task files, ...)."""
    seconds: float
    finished_at: str
    """UTC time, ISO 8601."""


class CheckpointFacts(Record):
    """What the evaluated checkpoint's meta says about its training (the budget the report checks)."""

    step: int
    meta_sha256: str
    """sha256 (16 hex) of the checkpoint's meta file: identifies the checkpoint beyond its step."""
    tokens_trained: int | None = None
    skipped_steps: int | None = None
    data_start: str | None = None
    """Where the run's data began (e.g. `after_base`, `beginning`); null when the meta does not say."""
    seed: int | None = None
    """Training seed."""
    train_code_version: str | None = None
    """`CodeVersion.label` recorded by the training run (null for checkpoints written elsewhere)."""
    train_world_size: int | None = None
    train_dtype: str | None = None


# ----------------------------------------------------------------------------- metric sections


class BpbSplit(Record):
    """BPB of one split over a fixed set of whole documents."""

    bpb: float | None
    nats: float
    bytes: int
    tokens: int
    """Scored target tokens (special tokens excluded)."""
    docs: int
    """Documents scored (each whole, each once)."""
    docs_available: int
    """Documents in the split's pool (see `rlab.evals.bpb.score`)."""
    token_budget: int
    whole_split: bool
    """True when the budget exceeded the pool: every document was scored once, none twice."""
    window: int
    """Targets per forward window (the model's training length); longer documents span several windows."""


class BpbMetric(Record):
    convention: str
    train: BpbSplit | None = None
    val: BpbSplit | None = None


class LengthRow(Record):
    columns: ClassVar[tuple[str, ...]] = ("length", "bpb", "tokens", "docs")
    length: int
    bpb: float | None
    tokens: int
    docs: int
    block: int | None = None
    blocks: int | None = None
    context_min: int | None = None
    context_max: int | None = None
    short_docs: int | None = None
    ppl: float | None = None
    """sliding/truncated protocols: YaRN's perplexity, exp(mean over windows of each window's mean NLL)."""
    windows: int | None = None
    """sliding/truncated protocols: forward windows scored at this length."""


class Skipped(Record):
    length: int
    reason: str


class LongDocsSummary(Record):
    """Which long-document set an eval used (`rlab.data.long_docs`): equal sha256 = the same documents."""

    sha256: str
    docs: int
    tokens: int
    min_tokens: int
    tokenizer_sha256: str


class BpbLengthMetric(Record):
    convention: str
    protocol: Literal["same_targets", "sliding", "truncated"] = "same_targets"
    """`eval.ppl_protocol`: same_targets (rlab's paired default) or YaRN's sliding/truncated perplexity."""
    block: int | None = None
    """same_targets: targets per block (B); null for the YaRN protocols."""
    longest: int
    units: int | None = None
    """Independent units behind each length: blocks (same_targets) or documents (sliding/truncated)."""
    docs: int | None = None
    stride: int | None = None
    """sliding: YaRN's --sliding-window."""
    lengths: list[LengthRow]
    skipped: list[Skipped] = Field(default_factory=list)
    long_docs: LongDocsSummary | None = None


class CoreTask(Record):
    accuracy: float
    centered: float
    baseline: float
    """Random-guess accuracy as a fraction in [0, 1)."""
    n: int
    type: str


class CoreMetric(Record):
    core: float | None
    partial: bool
    missing_tasks: list[str] = Field(default_factory=list)
    tasks: dict[str, CoreTask]
    selection: list[str] | None = None
    """The tasks `eval.core_tasks` picked when it picked a subset of the bundle (then this is not the full CORE,
    and the report says "CORE (k of N tasks)"); None = every task of the bundle."""
    bundle_tasks: int | None = None
    """Tasks in the bundle's core.yaml (the N of "k of N")."""

    @property
    def label(self) -> str:
        """`CORE`, or `CORE (k of N tasks)` for a subset, which must never read as the full CORE."""
        if self.selection is None:
            return "CORE"
        return f"CORE ({len(self.selection)} of {self.bundle_tasks or '?'} tasks)"

    @field_validator("tasks")
    @classmethod
    def _baselines_are_fractions(cls, tasks: dict[str, CoreTask]) -> dict[str, CoreTask]:
        bad = [k for k, t in tasks.items() if not 0.0 <= t.baseline < 1.0]
        if bad:
            raise ValueError(f"baseline must be a fraction in [0, 1) (tasks: {', '.join(bad)})")
        return tasks


class PasskeyCell(Record):
    columns: ClassVar[tuple[str, ...]] = ("length", "depth", "accuracy", "n")
    length: int
    depth: float
    accuracy: float
    n: int
    """Trials, each with its own key (independent units)."""
    correct: int | None = None


class PasskeyLength(Record):
    """All depths of one length pooled: n = depths x trials independent keys."""

    length: int
    accuracy: float
    correct: int
    n: int


class PasskeyTrial(Record):
    """One trial (passkey_trials.csv): the unit the report's intervals count."""

    columns: ClassVar[tuple[str, ...]] = ("length", "depth", "trial", "key", "correct")
    length: int
    depth: float
    trial: int
    key: str
    correct: int


class ChoiceTrial(Record):
    """One item scored by likelihood (passkey_choices.csv, ruler_choices.csv; `rlab.evals.retrieval.likelihood`):
    the right value's mean log-probability per token against the best distractor's. The unit of its intervals."""

    columns: ClassVar[tuple[str, ...]] = (
        "task",
        "length",
        "depth",
        "trial",
        "right_logp",
        "best_other_logp",
        "margin",
        "correct",
    )
    task: str
    length: int
    depth: float | None = None
    """passkey only: the needle's depth."""
    trial: int
    right_logp: float
    best_other_logp: float
    margin: float
    """right_logp - best_other_logp (nats/token; > 0 = correct)."""
    correct: int


class ChoiceCell(Record):
    """Likelihood-scored retrieval over the items of one length (and task)."""

    task: str | None = None
    length: int
    accuracy: float
    margin: float
    n: int


class LikelihoodRetrieval(Record):
    """Passkey / RULER-style items scored by likelihood, beside their generation score (section `likelihood`)."""

    scoring: str
    choices: int
    """Candidates per item: the right value and choices - 1 distractors of the same form."""
    chance: float
    accuracy: float | None
    margin: float | None
    n: int
    by_length: list[ChoiceCell]
    by_task: list[ChoiceCell] = Field(default_factory=list)


class PasskeyMetric(Record):
    protocol: str | None = None
    lengths: list[int]
    depths: list[float]
    trials: int
    units: int | None = None
    overall: float | None
    by_length: list[PasskeyLength] = Field(default_factory=list)
    cells: list[PasskeyCell]
    skipped: list[Skipped] = Field(default_factory=list)
    likelihood: LikelihoodRetrieval | None = None
    """The same keys scored by likelihood (eval.retrieval_choices; null = not run)."""


class RulerCell(Record):
    """Mean score of one RULER-style task at one length (ruler.csv)."""

    columns: ClassVar[tuple[str, ...]] = ("task", "length", "score", "n")
    task: str
    length: int
    score: float
    n: int
    """Generated examples (independent units)."""


class RulerLength(Record):
    length: int
    score: float
    """Mean over the tasks run at this length."""
    tasks: int
    n: int


class RulerTrial(Record):
    """One generated example's score in [0, 1] (ruler_trials.csv)."""

    columns: ClassVar[tuple[str, ...]] = ("task", "length", "trial", "score")
    task: str
    length: int
    trial: int
    score: float


class RulerSkipped(Record):
    task: str
    length: int
    reason: str


class RulerMetric(Record):
    """RULER-style subset (`rlab.evals.ruler.tasks`): task definitions after Hsieh et al. 2024; not RULER scores."""

    name: str
    citation: str
    scoring: str
    tasks: list[str]
    lengths: list[int]
    trials: int
    units: int
    max_new_tokens: dict[str, int]
    max_new_tokens_rule: str | None = None
    by_task: list[RulerCell]
    by_length: list[RulerLength]
    skipped: list[RulerSkipped] = Field(default_factory=list)
    long_docs: LongDocsSummary | None = None
    likelihood: LikelihoodRetrieval | None = None
    """The same examples scored by likelihood (eval.retrieval_choices; null = not run)."""


class CopyWindow(Record):
    """Copy-by-distance at one window: mean losses over its records (intervals are the report's)."""

    window: int
    distance: int
    """Tokens from the passage's first occurrence to its repeat."""
    control_nats: float
    """Mean loss per token on the repeat's tokens in the control window (another passage in place of the first)."""
    copy_nats: float
    """Mean loss per token on the repeat."""
    gain: float
    """control_nats - copy_nats: nats per token the model saves by looking back `distance` tokens."""
    copy_acc: float
    """Greedy hit rate on the repeat."""
    n: int
    """Records (the independent units)."""


class CopyDistanceMetric(Record):
    passage: int
    prefix: int
    windows: list[CopyWindow]
    nested: bool = False
    """Records are nested across windows (the same passage, control and filler; only the gap varies), so a
    record's gains at two distances are paired; absent (false) in files of older rlab versions."""


class WindowsAt(Record):
    """The attention windows of one input length (`rlab.core.architecture.eval_window_sizes`)."""

    length: int
    windows: list[int] | None
    """Per layer, how far back a query attends; null = the model has no windowed layers."""
    capped_at: int | None
    """The farthest back any layer attends when that is less than the input needs (length - 1): the model
    cannot use the whole window (the report marks such lengths); null = some layer sees the whole input."""


class AttentionRecord(Record):
    """How attention windows were sized in this evaluation, at every length its evals used."""

    rule: Literal["extend", "scale", "capped"]
    """`eval.attention_windows` (it matters only for windowed models past their sequence_len)."""
    windowed: bool
    """The model has sliding-window layers (nanochat-2026 `window_pattern`)."""
    sequence_len: int
    lengths: list[WindowsAt]


class EvalMetrics(Record):
    """One optional section per eval (absent = not run); keys are `rlab.spec.eval.EvalName`s."""

    bpb: BpbMetric | None = None
    bpb_length: BpbLengthMetric | None = None
    core: CoreMetric | None = None
    passkey: PasskeyMetric | None = None
    ruler: RulerMetric | None = None
    copy_distance: CopyDistanceMetric | None = None

    def present(self) -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) is not None]


class EvalDoc(Record):
    """eval.json: everything measured on one checkpoint of one tag."""

    schema_: Literal["rlab.eval/2"] = Field(EVAL_SCHEMA, alias="schema")
    experiment: str
    tag: str
    variant: str
    rope: dict[str, Any]
    rope_eval: dict[str, Any] | None = None
    """How the RoPE frequencies were chosen during this evaluation (`rlab.evals.rope_eval`; dynamic-ntk's rule)."""
    attention: AttentionRecord | None = None
    """How attention windows were sized at each eval length (`rlab.evals.windows`); absent in older files."""
    train_seq_len: int
    checkpoint: CheckpointFacts
    metrics: EvalMetrics
    measured: dict[str, SectionRun]
    """How each section of `metrics` was measured (same keys)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_attribute_docstrings=True)

    @property
    def step(self) -> int:
        return self.checkpoint.step

    def section(self, name: str) -> Any:
        return getattr(self.metrics, name, None)


def _json_safe(value: Any) -> Any:
    """NaN/inf are not JSON: null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def write_eval_doc(path: Path, doc: EvalDoc) -> None:
    """eval.json, atomically (non-finite numbers become null)."""
    from rlab.atomic_io import write_text_atomic

    data = doc.model_dump(mode="json", by_alias=True)
    data["metrics"] = {k: v for k, v in data["metrics"].items() if v is not None}  # absent = not run
    data = _json_safe(data)
    write_text_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def read_eval_doc(path: Path) -> EvalDoc:
    """eval.json through its model; a ContractError naming the file when it does not match."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ContractError(f"No eval.json at {path}.", "Run `rlab eval --tag TAG` first.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ContractError(
            f"{path} is not readable JSON ({type(exc).__name__}).", "Re-run `rlab eval` for this tag."
        ) from None
    if isinstance(data, dict) and data.get("schema") != EVAL_SCHEMA:
        raise ContractError(
            f"{path} has schema {data.get('schema')!r}, this rlab reads {EVAL_SCHEMA!r}.",
            "Re-run `rlab eval` for this tag with this version of rlab.",
        )
    try:
        return EvalDoc.model_validate(data)
    except ValidationError as exc:
        raise ContractError(
            f"{path} does not match the eval.json contract: {_first_error(exc)}.",
            "Re-run `rlab eval` for this tag.",
        ) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" + (
        f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    )


# ----------------------------------------------------------------------------- settings and hashes


_LENGTHS = ("lengths", "target_len", "extra_lengths")
_ROPE_EVAL = ("dynamic_ntk", "dynamic_ntk_len")
SECTION_SETTINGS: dict[str, tuple[str, ...]] = {
    "bpb": ("bpb_tokens", "seed"),
    "bpb_length": (
        *_LENGTHS,
        "length_tokens",
        "length_block",
        "ppl_protocol",
        "ppl_stride",
        "ppl_docs",
        *_ROPE_EVAL,
    ),
    "core": ("core_bundle", "max_per_task", "seed"),
    "passkey": (
        "passkey_lengths",
        "passkey_depths",
        "passkey_trials",
        "retrieval_choices",
        *_LENGTHS,
        "seed",
        *_ROPE_EVAL,
    ),
    "ruler": (
        "ruler_tasks",
        "ruler_lengths",
        "ruler_trials",
        "retrieval_choices",
        *_LENGTHS,
        "seed",
        *_ROPE_EVAL,
    ),
    "copy_distance": ("copy_lengths", "copy_trials", *_LENGTHS, "seed", *_ROPE_EVAL),
}
"""The EvalSpec fields each section depends on. A section not listed depends on every field except
`evals`, `device_batch_size` (which evals never depend on: BPB is invariant to it, tested) and `target_mde`
(planning only)."""
_NEVER_RELEVANT = ("evals", "device_batch_size", "target_mde")
WINDOWED_SECTIONS = ("bpb_length", "passkey", "ruler", "copy_distance")
"""Sections that evaluate past the model's sequence_len, so `eval.attention_windows` changes what they measure
(for a windowed model: the runner adds the rule to their settings, `rlab.evals.windows.window_setting`)."""


def short_hash(data: Any) -> str:
    """sha256 (12 hex) of canonical JSON (sorted keys) or of bytes."""
    raw = data if isinstance(data, bytes) else json.dumps(data, sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:12]


def section_settings(
    section: str, settings: dict[str, Any], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The settings `section` depends on, plus facts of the run that change what it measures (`extra`)."""
    keys = SECTION_SETTINGS.get(section)
    picked = (
        {k: settings.get(k) for k in keys}
        if keys is not None
        else {k: v for k, v in settings.items() if k not in _NEVER_RELEVANT}
    )
    return {**picked, **(extra or {})}


# ----------------------------------------------------------------------------- CSV side files


class BpbUnit(Record):
    """One unit of a BPB metric: `metric` is train, val or len_<L>; the report resamples units by `doc`."""

    columns: ClassVar[tuple[str, ...]] = ("section", "metric", "unit", "doc", "nats", "bytes", "tokens")
    section: str
    """The eval.json section that owns the unit (a partial re-eval replaces only its sections' units)."""
    metric: str
    unit: str
    """Unit id, the same across tags evaluated on the same data (train/val: the document id; lengths: block index)."""
    doc: str
    """The document the unit belongs to (the cluster for resampling)."""
    nats: float
    bytes: int
    tokens: int


class BpbDoc(Record):
    """A document train/val BPB scored: recorded so that two evals can be shown to score the same text."""

    columns: ClassVar[tuple[str, ...]] = ("split", "doc", "sha256", "tokens")
    split: str
    doc: str
    """`<shard file stem>:<row>`."""
    sha256: str
    """Of the UTF-8 text, 16 hex."""
    tokens: int


class CoreExample(Record):
    columns: ClassVar[tuple[str, ...]] = ("task", "index", "correct")
    task: str
    index: int
    correct: int


class CopyRow(Record):
    """One copy-by-distance record at one window (rlab.evals.copy_distance.task): the report's resampling unit."""

    columns: ClassVar[tuple[str, ...]] = (
        "window",
        "distance",
        "record",
        "control_nats",
        "copy_nats",
        "copy_acc",
        "tokens",
    )
    window: int
    distance: int
    record: int
    control_nats: float
    copy_nats: float
    copy_acc: float
    tokens: int
    """Scored targets per copy (the passage length - 1)."""


class CoreTaskRow(Record):
    columns: ClassVar[tuple[str, ...]] = ("task", "type", "accuracy", "centered", "baseline", "n")
    task: str
    type: str
    accuracy: float
    centered: float
    baseline: float
    n: int


R = TypeVar("R", bound=Record)


def _cell(value: Any) -> Any:
    return "" if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


def write_rows(path: Path, rows: Iterable[Record], columns: Sequence[str] | None = None) -> None:
    """A CSV of the rows' `columns` (default: the model's), atomically."""
    from rlab.atomic_io import write_text_atomic

    rows = list(rows)
    if columns is None:
        if not rows:
            raise ValueError(f"{path.name}: no rows and no columns")
        columns = type(rows[0]).columns

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        data = row.model_dump()
        writer.writerow([_cell(data.get(c)) for c in columns])
    write_text_atomic(path, buf.getvalue())


def read_rows(path: Path, cls: type[R], columns: Sequence[str] | None = None) -> list[R]:
    """A CSV written by `write_rows`, validated row by row against `cls`; ContractError when it does not match."""
    columns = tuple(columns or cls.columns)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"Cannot read {path} ({type(exc).__name__}).") from None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != columns:
        raise ContractError(
            f"{path} has columns {', '.join(reader.fieldnames or [])}; expected {', '.join(columns)}.",
            "Re-run `rlab eval` for this tag.",
        )
    records = [{k: (None if v == "" else v) for k, v in r.items() if k in cls.model_fields} for r in reader]
    try:
        return TypeAdapter(list[cls]).validate_python(records)  # type: ignore[valid-type]
    except ValidationError as exc:
        raise ContractError(
            f"{path} does not match its contract: {_first_error(exc)}.", "Re-run `rlab eval` for this tag."
        ) from None


# ----------------------------------------------------------------------------- metrics.jsonl


class MetricsBase(Record):
    """NaN and inf are kept as JSON constants (a skipped step's loss is NaN, and that is information)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="constants")


class TrainRecord(MetricsBase):
    type: Literal["train"] = "train"
    step: int
    start_step: int
    end_step: int
    loss: float
    lr_mult: float
    grad_norm: float
    tokens: int
    tokens_per_s: float
    flops_per_s: float
    mfu: float | None = None
    skipped: int
    peak_mem_mb: float
    rank_losses: list[float] | None = None
    skip_reason: str | None = None
    time: float


class EvalRecord(MetricsBase):
    type: Literal["eval"] = "eval"
    step: int
    val_bpb: float | None
    peak_mem_mb: float | None = None
    time: float


class DoneRecord(MetricsBase):
    type: Literal["done"] = "done"
    step: int
    skipped: int | None = None
    val_bpb: float | None = None
    time: float


class FailedRecord(MetricsBase):
    type: Literal["failed"] = "failed"
    step: int | None
    error: str
    time: float


MetricsRecord = Annotated[TrainRecord | EvalRecord | DoneRecord | FailedRecord, Field(discriminator="type")]
_METRICS_ADAPTER: TypeAdapter = TypeAdapter(MetricsRecord)


def metrics_record(data: dict[str, Any]) -> TrainRecord | EvalRecord | DoneRecord | FailedRecord:
    """Validate one metrics.jsonl record (a dict with `type`)."""
    return _METRICS_ADAPTER.validate_python(data)


def read_metrics_records(path: Path) -> list[TrainRecord | EvalRecord | DoneRecord | FailedRecord]:
    """Every record of a metrics.jsonl. A torn last line (a job still writing) is skipped; any other bad
    line is a ContractError naming the file and line."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(_METRICS_ADAPTER.validate_json(line))
        except ValidationError as exc:
            if i == len(lines) and not line.rstrip().endswith("}"):
                break  # torn last line
            raise ContractError(f"{path}:{i} is not a metrics record: {_first_error(exc)}.") from None
    return out


# ----------------------------------------------------------------------------- results.csv


ResultCell = float | int | bool | str | None


class ResultsRow(Record):
    """One row of results.csv. The fixed fields are identity and provenance; the report adds metric and
    comparison columns (`<metric>`, `<metric>_ci_low`, `..._vs_<baseline>...`) as extra fields."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    experiment: str
    tag: str
    variant: str
    step: int | None = None
    train_seq_len: int | None = None
    tokens_trained: int | None = None
    skipped_steps: int | None = None
    data_start: str | None = None
    seed: int | None = None
    dtype: str | None = None
    """Eval compute dtype."""
    world_size: str | None = None
    """Eval world size(s), `;`-joined when sections ran at different sizes (results do not depend on it)."""
    code_version: str | None = None
    """Eval code version(s): `CodeVersion.label`, `;`-joined when sections came from different runs."""
    train_code_version: str | None = None
    eval_settings_hash: str | None = None
    """Hash over every section's settings hash (equal across tags iff every section was set up alike)."""
    eval_data_hash: str | None = None
    """Hash over every section's data hash."""

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if value == "" else value


PROVENANCE_COLUMNS: tuple[str, ...] = tuple(
    n for n in ResultsRow.model_fields if n not in ("experiment", "tag", "variant")
)


def provenance(doc: EvalDoc) -> dict[str, Any]:
    """The provenance columns of results.csv from one eval.json."""
    runs = [doc.measured[k] for k in sorted(doc.measured)]
    ck = doc.checkpoint
    return {
        "step": ck.step,
        "train_seq_len": doc.train_seq_len,
        "tokens_trained": ck.tokens_trained,
        "skipped_steps": ck.skipped_steps,
        "data_start": ck.data_start,
        "seed": ck.seed,
        "dtype": ";".join(sorted({r.dtype for r in runs})) or None,
        "world_size": ";".join(str(w) for w in sorted({r.world_size for r in runs})) or None,
        "code_version": ";".join(sorted({r.code_version.label for r in runs})) or None,
        "train_code_version": ck.train_code_version,
        "eval_settings_hash": short_hash({k: doc.measured[k].settings_hash for k in sorted(doc.measured)}),
        "eval_data_hash": short_hash({k: doc.measured[k].data_hash for k in sorted(doc.measured)}),
    }
