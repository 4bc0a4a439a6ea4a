"""The checkpoint meta file (`meta_{step:06d}.json`): one typed model, one reader, one writer.

nanochat writes the meta as a plain dict (`scripts/base_train.py`): `step`, `val_bpb`, `model_config`,
`user_config` (its command-line arguments), `device_batch_size`, `max_seq_len`, `dataloader_state_dict`
(rank 0's loader position), `loop_state`, and from 92d63d4 on `total_batch_size` and a loader `epoch`.
rlab reads those and adds its own (RoPE config, lineage, loader state, run config, optimizer files,
counters, provenance). Every field rlab reads is typed here; every other key, whoever wrote it, is kept
as written (`extra="allow"`), and a key absent from the file stays absent when the meta is written back,
so a nanochat meta read and written by rlab (a clone) loses nothing nanochat's own tools read.

Old rlab metas load too: each part is typed only where rlab reads it, and what rlab no longer writes
(`optimizer.file`, model_config's `architecture`, ...) rides along as an extra key.

Pydantic only (no torch): the orchestrator and the CLI read metas before any job starts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from rlab.atomic_io import atomic_write
from rlab.errors import CheckpointError
from rlab.paths import checkpoint_steps, meta_file, model_file
from rlab.records.base import first_error, short_hash
from rlab.records.provenance import CodeVersion, Platform
from rlab.spec.rope import RopeSpec
from rlab.spec.run import Lineage

CORRUPT_HINT = "The file is corrupt; restore it from a copy or choose another step."

Count = Annotated[int, Field(strict=True, gt=0)]
"""A positive JSON integer (true is not 1)."""


class MetaPart(BaseModel):
    """A part of the meta: typed where rlab reads it, every other key kept as it was written.

    Dumps only the fields that were given (read from the file, or passed when built), in the file's order,
    so a meta read and written back is the same JSON object, key for key.
    """

    model_config = ConfigDict(
        extra="allow",
        frozen=True,
        use_attribute_docstrings=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    _order: tuple[str, ...] = PrivateAttr(default=())
    """The keys in the order the file had them (written back in that order, new keys after)."""

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ModelWrapValidatorHandler[MetaPart]) -> MetaPart:
        part = handler(data)
        if isinstance(data, dict):
            part._order = tuple(str(k) for k in data)
        return part

    def __eq__(self, other: object) -> bool:
        """Equal when they write the same JSON object (however each was made)."""
        return type(other) is type(self) and self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        data = handler(self)
        fields = type(self).model_fields
        given = {fields[name].alias or name for name in self.model_fields_set if name in fields}
        kept = [k for k in data if k in given or k in (self.model_extra or {})]
        rank = {k: i for i, k in enumerate(self._order)}
        kept.sort(key=lambda k: rank.get(k, len(rank)))  # stable: new keys keep the declared order
        return {k: data[k] for k in kept}


# ----------------------------------------------------------------------------- nanochat's parts


class ModelShape(MetaPart):
    """`model_config`: nanochat's `GPTConfig` keyword arguments (2026 adds `window_pattern`)."""

    sequence_len: Count
    """Training context length: L0 of a RoPE extension unless the meta's rope says otherwise."""
    vocab_size: Count
    n_layer: Count
    n_head: Count
    n_kv_head: Count
    n_embd: Count
    window_pattern: str | None = None
    """nanochat-2026: S(hort)/L(ong) attention window per layer, tiled; absent = "L" (nanochat's patch)."""

    @field_validator("window_pattern")
    @classmethod
    def _letters(cls, value: str | None) -> str | None:
        if value is not None and (not value or set(value.upper()) - {"S", "L"}):
            raise ValueError(f"must be letters S and L (got {value!r})")
        return value

    def nanochat_kwargs(self) -> dict[str, Any]:
        """The keys as written (what nanochat's GPTConfig / rlab's `GPTConfig.from_dict` take)."""
        return self.model_dump()


class NanochatArgs(MetaPart):
    """`user_config`: nanochat's command-line arguments; rlab reads the batch arithmetic only."""

    total_batch_size: int | None = None
    device_batch_size: int | None = None
    max_seq_len: int | None = None


class NanochatLoaderPosition(MetaPart):
    """`dataloader_state_dict`: the shard and row group rank 0 was reading when nanochat saved."""

    pq_idx: int | None = None
    rg_idx: int | None = None
    epoch: int | None = None
    """92d63d4 on: the pass over the data (from 1)."""


# ----------------------------------------------------------------------------- rlab's parts


class LoaderState(MetaPart):
    """`loader_state`: every rank's `TokenLoader.state_dict()` (its own format) and the world size."""

    world_size: int
    ranks: list[dict[str, Any]]


class DataStartRecord(MetaPart):
    """`data_start`: where the run's train data began (`{"source": "beginning"}`, or the plan's `DataStart`
    with how the trainer placed it)."""

    source: str
    """beginning | nanochat | rlab (then the fields of `rlab.spec.run.DataStart` follow)"""
    tag: str | None = None
    step: int | None = None
    pq_idx: int | None = None
    rg_idx: int | None = None
    epoch: int | None = None
    loader_state: dict[str, Any] | None = None
    describe: str | None = None
    """The plan's label, e.g. ``after d20@21400 (pq 3, rg 17)``."""
    world_size: int | None = None
    """nanochat bases: the base run's world size (or a multiple of it) the position was read under."""
    world_size_from: str | None = None
    approximate: str | None = None

    @property
    def label(self) -> str:
        """`beginning`, the plan's label, else a hash of the record (older metas)."""
        if self.describe is not None:
            return self.describe
        if self.model_dump().keys() == {"source"}:
            return self.source
        return short_hash(self.model_dump())


class TrainArgs(MetaPart):
    """`run_config.train`, the parts a checkpoint's readers need."""

    seed: int | None = None
    seq_len: int | None = None
    device_batch_size: int | None = None
    total_batch_size: int | None = None
    """None: one micro-step per optimizer step (device_batch_size x seq_len x world size tokens)."""
    data_start: str | None = None
    """Older metas: `after_base` / `beginning`, the only record of the data start they have."""


class RunConfigRecord(MetaPart):
    """`run_config`: the `RunConfig` the run was started with, as written then (read leniently: a newer rlab
    must still read the checkpoints an older one trained)."""

    experiment: str | None = None
    tag: str | None = None
    variant: str | None = None
    train: TrainArgs | None = None
    data_start: dict[str, Any] | None = None


class OptimizerImport(MetaPart):
    """`optimizer.import`: what importing nanochat's optimizer shards did (`ImportReport`)."""

    restored: bool
    reason: str
    format: str | None = None
    world_size: int | None = None
    nanochat_step: int | None = None
    muon_momentum: float | None = None
    notes: list[str] = []


class OptimizerRecord(MetaPart):
    """`optimizer`: the step's optimizer files and where the run's optimizer state came from."""

    format: str | None = None
    files: list[str] | None = None
    sharded: bool | None = None
    save_id: str | None = None
    at_start: str | None = None
    imported: OptimizerImport | None = Field(None, alias="import")


class LrPolicy(MetaPart):
    """The peak-LR scale and warmup a run began with (kept on resume)."""

    peak_lr_scale: float
    warmup_steps: int


class TrainState(MetaPart):
    """`train_state`: what a resume of the same run needs, and its cumulative counters."""

    run_key: str | None = None
    run_start_step: int | None = None
    end_step: int | None = None
    skipped_total: int | None = None
    run_tokens: int | None = None
    lr_policy: LrPolicy | None = None
    resumed_from: int | None = None
    dtype: str | None = None
    platform: Platform | None = None
    """The machine the process that wrote this checkpoint ran on (CPU, ISA, torch, threads)."""


# ----------------------------------------------------------------------------- the meta


class CheckpointMeta(MetaPart):
    """One checkpoint's `meta_{step:06d}.json`: nanochat's keys first, then rlab's."""

    step: int
    val_bpb: float | None = None
    shape: ModelShape = Field(alias="model_config")
    user_config: NanochatArgs | None = None
    device_batch_size: int | None = None
    max_seq_len: int | None = None
    total_batch_size: int | None = None
    dataloader_state_dict: NanochatLoaderPosition | None = None
    loop_state: dict[str, Any] | None = None

    architecture: str | None = None
    """nanochat-2025 | nanochat-2026 (rlab writes it; a nanochat meta is told by its keys)."""
    rope: RopeSpec | None = None
    """The checkpoint's RoPE config; absent = plain rope at model_config.sequence_len."""
    parent_rope: RopeSpec | None = None
    """A clone's: the RoPE config of the step it was cloned from."""
    lineage: Lineage | None = None
    tag: str | None = None
    variant: str | None = None
    experiment: str | None = None
    """A clone's: the experiment that owns the tag (a trained step says it in run_config)."""
    tokens_trained: int | None = None
    """Tokens of the applied optimizer steps behind these weights, the base's included."""
    loader_state: LoaderState | None = None
    data_start: DataStartRecord | None = None
    run_config: RunConfigRecord | None = None
    optimizer: OptimizerRecord | None = None
    world_size: int | None = None
    rlab_version: str | None = None
    code_version: CodeVersion | None = None
    train_state: TrainState | None = None
    replica_param_checksums: list[float] | None = None

    @property
    def sequence_len(self) -> int:
        return self.shape.sequence_len

    def rope_spec(self, rotary_base: float | None = None) -> RopeSpec:
        """The checkpoint's RoPE config with L0 filled in (a nanochat meta has none: plain rope at its
        sequence_len); `rotary_base` fills a base the spec leaves to the checkpoint."""
        spec = (self.rope or RopeSpec()).with_original_len(self.sequence_len)
        return spec.with_base(rotary_base) if rotary_base is not None else spec

    @property
    def experiment_name(self) -> str | None:
        """The experiment that trained this step (run_config), else the one a clone was made for."""
        if self.run_config is not None and self.run_config.experiment is not None:
            return self.run_config.experiment
        return self.experiment

    def owner(self, tag: str) -> str | None:
        """The experiment that owns `tag`: the run that trained it (its run_config names the tag), else the
        clone's record."""
        run = self.run_config
        if run is not None and run.tag == tag and run.experiment is not None:
            return run.experiment
        return self.experiment

    @property
    def variant_name(self) -> str | None:
        return self.variant or (self.run_config.variant if self.run_config is not None else None)

    def tokens_behind(self) -> int:
        """Tokens behind these weights: rlab's `tokens_trained`, or nanochat's step x total_batch_size."""
        if self.tokens_trained is not None:
            return self.tokens_trained
        total = self.user_config.total_batch_size if self.user_config is not None else None
        return self.step * total if total is not None and total > 0 else 0

    @property
    def data_start_label(self) -> str | None:
        """Where the run's data began: the meta's `data_start`, else (older metas) the run config's."""
        if "data_start" in self.model_fields_set:
            return self.data_start.label if self.data_start is not None else None
        run = self.run_config
        if run is not None and "data_start" in run.model_fields_set:
            recorded = run.data_start
            return DataStartRecord.model_validate(recorded).label if recorded is not None else None
        return run.train.data_start if run is not None and run.train is not None else None

    @property
    def train_seed(self) -> int | None:
        run = self.run_config
        return run.train.seed if run is not None and run.train is not None else None


# ----------------------------------------------------------------------------- reading and writing


def load_meta(path: Path) -> CheckpointMeta:
    """The meta in `path`, checked; one `CheckpointError` naming the file (and the field) otherwise."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(
            f"Meta file not found: {path}", "Check the path (`rlab ls` lists checkpoints)."
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(
            f"{path}: meta is not UTF-8 text (byte {exc.start}: {exc.reason}).", CORRUPT_HINT
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(
            f"{path}: unreadable meta JSON ({exc.msg} at line {exc.lineno} column {exc.colno}).", CORRUPT_HINT
        ) from None
    if not isinstance(data, dict):
        raise CheckpointError(
            f"{path}: meta must be a JSON object (got {type(data).__name__}).", CORRUPT_HINT
        )
    try:
        return CheckpointMeta.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        got = f" (got {first['input']!r})" if first["type"] != "missing" else ""
        raise CheckpointError(f"{path}: meta {where}: {first['msg']}{got}.", CORRUPT_HINT) from None


def read_meta(ckpt_dir: Path, step: int) -> CheckpointMeta:
    """The meta of one complete checkpoint (`load_meta`); `CheckpointError` listing the steps that exist."""
    ckpt_dir = Path(ckpt_dir)
    if not meta_file(ckpt_dir, step).exists() or not model_file(ckpt_dir, step).exists():
        found = checkpoint_steps(ckpt_dir)
        listing = ", ".join(str(s) for s in found) if found else "none"
        raise CheckpointError(
            f"No complete checkpoint for step {step} in {ckpt_dir} (found: {listing}).",
            hint="Choose one of the listed steps." if found else "Check the base dir and tag.",
        )
    return load_meta(meta_file(ckpt_dir, step))


def newest_meta(ckpt_dir: Path) -> CheckpointMeta | None:
    """The meta of a tag folder's newest complete checkpoint; None when there is none or it is unreadable."""
    steps = checkpoint_steps(Path(ckpt_dir))
    if not steps:
        return None
    try:
        return load_meta(meta_file(Path(ckpt_dir), steps[-1]))
    except (CheckpointError, OSError):
        return None


def meta_text(meta: CheckpointMeta) -> str:
    """The file's text: indented JSON, nanochat's keys first, every key the meta was given."""
    return json.dumps(meta.model_dump(mode="json"), indent=2) + "\n"


def meta_sha256(ckpt_dir: Path, step: int) -> str:
    """sha256 (16 hex) of the meta file as written: identifies the checkpoint beyond its step."""
    return hashlib.sha256(meta_file(Path(ckpt_dir), step).read_bytes()).hexdigest()[:16]


def write_meta(ckpt_dir: Path, step: int, meta: CheckpointMeta) -> None:
    """Write the meta of `step` atomically (the last file of a checkpoint: its presence means complete), once it
    reads back through its model (a non-finite checksum would be written as null and break every resume)."""
    text = meta_text(meta)
    try:
        CheckpointMeta.model_validate_json(text)
    except ValidationError as exc:
        raise CheckpointError(
            f"Refusing to write {meta_file(Path(ckpt_dir), step)}: it would not read back ({first_error(exc)}).",
            "The checkpoint stays incomplete; the previous one is untouched.",
        ) from None
    atomic_write(meta_file(Path(ckpt_dir), step), lambda fh: fh.write(text), binary=False)
