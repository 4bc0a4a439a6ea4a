"""The shape of one rank's training step: the model, the rows it trains on, the world around it.

A `TrainShape` comes from a checkpoint meta (nanochat's or rlab's `meta_XXXXXX.json`) or a tag's newest
checkpoint, plus the run's sequence length, device batch size, number of ranks and gradient accumulation.
The model's `sequence_len` is set to the run's, as a continued run sets it (`rlab.core.train_start`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PositiveInt, model_validator

from rlab.core.architecture import DEFAULT_WINDOW_PATTERN, NANOCHAT_CONFIG_KEYS
from rlab.core.checkpoint_meta import CheckpointMeta, read_meta
from rlab.core.gpt_config import GPTConfig
from rlab.errors import CheckpointError, SpecError
from rlab.nanochat.generations import get_architecture
from rlab.paths import BaseLayout


def config_record(config: GPTConfig) -> dict[str, Any]:
    """The model's shape as a plan's JSON writes it: nanochat's model_config keys and the architecture, then
    the window pattern of a windowed architecture and a rotary base the checkpoint set (the keys a plan has
    always had, so cached plans and `rlab memory --json` keep their form)."""
    record: dict[str, Any] = {k: getattr(config, k) for k in NANOCHAT_CONFIG_KEYS}
    record["architecture"] = config.architecture
    if get_architecture(config.architecture).sliding_windows:
        record["window_pattern"] = config.window_pattern
    if config.rotary_base is not None:
        record["rotary_base"] = config.rotary_base
    return record


ModelConfig = Annotated[GPTConfig, PlainSerializer(config_record)]
"""A plan's model shape: `GPTConfig` in Python, `config_record`'s keys in JSON."""


class TrainShape(BaseModel):
    """One rank's share of a training step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: ModelConfig
    """The model, at the run's sequence length."""
    seq_len: PositiveInt
    device_batch_size: PositiveInt
    nproc: PositiveInt = 1
    grad_accum_steps: PositiveInt = 1
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    device: Literal["cuda", "cpu"] = "cuda"
    compile: bool = True
    """Whether the trainer runs the model under torch.compile (train.compile); unset: on for CUDA, off on a CPU."""
    shard_optimizer: bool = True
    """Whether the optimizer state is sharded across the ranks (train.shard_optimizer)."""
    activation_checkpointing: Annotated[str, Field(pattern=r"^(off|all|every-[1-9][0-9]{0,3})$")] = "off"
    """The blocks that keep only their input (`rlab.activation_checkpointing`, resolved: off, all, every-k)."""

    @model_validator(mode="before")
    @classmethod
    def _default_compile(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("compile") is None:
            data = {**data, "compile": data.get("device", "cuda") == "cuda"}
        return data

    @property
    def tokens(self) -> int:
        """Tokens per rank per micro-batch."""
        return self.device_batch_size * self.seq_len

    @property
    def total_batch_size(self) -> int:
        """Tokens per optimizer step across all ranks."""
        return self.tokens * self.nproc * self.grad_accum_steps

    def with_batch(self, device_batch_size: int, grad_accum_steps: int) -> TrainShape:
        return self.model_copy(
            update={"device_batch_size": device_batch_size, "grad_accum_steps": grad_accum_steps}
        )

    def describe(self) -> str:
        c = self.config
        return (
            f"{c.architecture} n_layer {c.n_layer}, n_embd {c.n_embd}, "
            f"{c.n_head} heads ({c.n_kv_head} kv), vocab {c.vocab_size:,}; "
            f"{self.device_batch_size} x {self.seq_len} tokens per rank, {self.nproc} rank(s), "
            f"accumulation {self.grad_accum_steps}, {self.dtype} on {self.device}"
            + (", compiled" if self.compile else "")
            + (
                f", activation checkpointing {self.activation_checkpointing}"
                if self.activation_checkpointing != "off"
                else ""
            )
        )

    def with_checkpointing(self, setting: str) -> TrainShape:
        return self.model_copy(update={"activation_checkpointing": setting})

    def with_seq_len(self, seq_len: int) -> TrainShape:
        """The same shape with rows (and the model's sequence length) of `seq_len` tokens."""
        return self.model_copy(
            update={"seq_len": seq_len, "config": replace(self.config, sequence_len=seq_len)}
        )


def model_config_from_meta(meta: CheckpointMeta) -> GPTConfig:
    """The model's shape from a checkpoint meta alone. The architecture is the meta's (rlab writes it), else
    nanochat-2026 when its model_config has a window_pattern (only 2026 nanochat writes one), else 2025."""
    shape = meta.shape
    return GPTConfig(
        **{k: getattr(shape, k) for k in NANOCHAT_CONFIG_KEYS},
        architecture=meta.architecture
        or ("nanochat-2026" if shape.window_pattern is not None else "nanochat-2025"),
        window_pattern=(shape.window_pattern or DEFAULT_WINDOW_PATTERN).upper(),
    )


def accumulation_for(total_batch_size: int | None, device_batch_size: int, seq_len: int, nproc: int) -> int:
    """Gradient-accumulation steps that keep `total_batch_size` (1 when it is unset); SpecError when it does not divide."""
    per_micro = device_batch_size * seq_len * nproc
    if total_batch_size is None:
        return 1
    if total_batch_size % per_micro:
        raise SpecError(
            f"total batch {total_batch_size} tokens is not a multiple of device_batch_size x seq_len x nproc "
            f"= {device_batch_size} x {seq_len} x {nproc} = {per_micro}."
        )
    return total_batch_size // per_micro


def shape_from_meta(
    meta: CheckpointMeta,
    *,
    seq_len: int | None = None,
    device_batch_size: int | None = None,
    nproc: int = 1,
    total_batch_size: int | None = None,
    dtype: Literal["bfloat16", "float32"] = "bfloat16",
    device: Literal["cuda", "cpu"] = "cuda",
    compile: bool | None = None,
    shard_optimizer: bool = True,
    source: str = "meta",
) -> TrainShape:
    """The training shape of continuing the checkpoint `meta` describes.

    Unset values come from the meta: its sequence length, and nanochat's `device_batch_size` (rlab
    writes it too). `total_batch_size` (tokens per step) sets the gradient accumulation.
    """
    config = model_config_from_meta(meta)
    seq = seq_len or config.sequence_len
    batch = device_batch_size or meta.device_batch_size
    if batch is None or batch < 1:
        raise SpecError(f"{source} records no device_batch_size: pass --device-batch-size.")
    accum = accumulation_for(total_batch_size, batch, seq, nproc)
    return TrainShape(
        config=replace(config, sequence_len=seq),
        seq_len=seq,
        device_batch_size=batch,
        nproc=nproc,
        grad_accum_steps=accum,
        dtype=dtype,
        device=device,
        compile=compile,
        shard_optimizer=shard_optimizer,
    )


def meta_of_tag(base_dir: Path, tag: str, step: int | None = None) -> tuple[CheckpointMeta, str]:
    """(meta, where it came from) of a tag's checkpoint at `step` (default: its newest), the
    architecture read from the weights' keys (`inspect_checkpoint`) rather than guessed from the meta."""
    from rlab.core.checkpoint import find_last_step, inspect_checkpoint  # noqa: PLC0415 - defers numpy, torch

    ckpt_dir = BaseLayout(Path(base_dir)).checkpoint_dir(tag)
    step = find_last_step(ckpt_dir) if step is None else step
    if step is None:
        raise CheckpointError(f"No checkpoint of tag '{tag}' in {ckpt_dir}.", "List the tags with `rlab ls`.")
    meta = read_meta(ckpt_dir, step)
    info = inspect_checkpoint(ckpt_dir, step)
    return meta.model_copy(update={"architecture": info.architecture}), f"{tag}@{step}"
