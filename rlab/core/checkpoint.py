"""Checkpoint files in nanochat's layout, written atomically, read back with their RoPE config.

One checkpoint at step S of a tag is these files in `<base>/base_checkpoints/<tag>/`:
`model_{S:06d}.pt` (state dict, nanochat's keys), `optim_{S:06d}_rank{r}.pt` (one optimizer file per
rank that holds a share of the state, as nanochat writes them; one file, rank 0's, when the state is
not sharded; `rlab.core.optim_shards` says what is in them) and `meta_{S:06d}.json` (nanochat's keys
plus rlab's: rope, lineage, loader state, run config, ...).

Every file is written to a hidden temp name, fsynced and renamed into place, and the meta is
written *last*: a checkpoint is complete if and only if its meta file exists. A crash mid-save
therefore leaves either the previous checkpoint set or temp files that nothing ever reads
(`rlab.paths.checkpoint_steps` only reports steps whose meta and model both exist). With several ranks, rank 0 first
removes the step's old meta (`begin_checkpoint`), the other ranks then write their optimizer files
(`write_optim_file`), and only after all of them rank 0 writes the model, its own file and the meta.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlab.atomic_io import atomic_write
from rlab.core.architecture import NANOCHAT_CONFIG_KEYS, Architecture, key_list
from rlab.core.checkpoint_meta import CheckpointMeta, read_meta, write_meta
from rlab.core.gpt_config import GPTConfig
from rlab.core.torch_zip import read_tensors, state_dict_keys
from rlab.errors import CheckpointError, TrainingError
from rlab.nanochat.detect import detect_architecture, window_pattern
from rlab.nanochat.generations import get_architecture
from rlab.nanochat.state_dict import patch_missing_keys, strip_compile_prefix
from rlab.paths import checkpoint_steps, meta_file, model_file, optim_file, optim_ranks

if TYPE_CHECKING:
    from rlab.core.gpt import GPT
    from rlab.spec.rope import RopeSpec

logger = logging.getLogger(__name__)


def find_last_step(ckpt_dir: Path) -> int | None:
    """Newest complete checkpoint step, or None when there is none."""
    steps = checkpoint_steps(ckpt_dir)
    return steps[-1] if steps else None


def nonfinite_tensors(state: dict[str, Any]) -> list[str]:
    """Names of floating-point tensors in `state` holding NaN or Inf."""
    import torch

    bad = []
    for name, value in state.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not torch.isfinite(value).all():
            bad.append(name)
    return bad


MAX_HEALTHY_WEIGHT = 65504.0
"""The largest |weight| a checkpoint may hold: float16's largest number. Trained LM weights are O(1); one past
this is an exploded run (an LR of 1e37 left weights of ~3e37), which no half-precision export could hold."""


def unhealthy_tensors(state: dict[str, Any], bound: float = MAX_HEALTHY_WEIGHT) -> list[str]:
    """Floating-point tensors of `state` with NaN/Inf or a |value| past `bound`, each with what is wrong."""
    import torch

    bad = []
    for name, value in state.items():
        if not (isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel()):
            continue
        if not torch.isfinite(value).all():
            bad.append(f"{name} (non-finite: NaN/Inf)")
        elif (peak := float(value.detach().abs().max())) > bound:
            bad.append(f"{name} (|w| up to {peak:.3g})")
    return bad


def begin_checkpoint(ckpt_dir: Path, step: int) -> None:
    """Rank 0, before any rank writes a file of `step`: until the new meta lands, the step is incomplete."""
    meta_file(Path(ckpt_dir), step).unlink(missing_ok=True)


def write_optim_file(ckpt_dir: Path, step: int, rank: int, payload: dict[str, Any]) -> None:
    """One rank's optimizer file of `step` (atomic)."""
    import torch

    atomic_write(optim_file(Path(ckpt_dir), step, rank), lambda fh: torch.save(payload, fh))


def save_checkpoint(
    ckpt_dir: Path,
    step: int,
    model_state: dict[str, Any],
    meta: CheckpointMeta,
    optim_state: dict[str, Any] | None = None,
    optim_files: int = 1,
) -> None:
    """Write model, rank 0's optimizer file and finally meta for `step` (the other ranks' files first).

    `optim_files`: how many optimizer files the set has; older files of ranks beyond it are removed.
    Refuses (TrainingError) to write parameters that are not finite or past `MAX_HEALTHY_WEIGHT`.
    """
    import torch

    ckpt_dir = Path(ckpt_dir)
    bad = unhealthy_tensors(model_state)
    if bad:
        raise TrainingError(
            f"Refusing to save step {step} of {ckpt_dir.name}: unhealthy weights in {', '.join(bad[:5])}"
            + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            + ".",
            hint="The previous checkpoint is untouched; lower the LR or enable grad clipping and resume.",
        )
    # Remove a stale meta first: until the new meta lands, this step must not look complete.
    meta_file(ckpt_dir, step).unlink(missing_ok=True)
    atomic_write(model_file(ckpt_dir, step), lambda fh: torch.save(model_state, fh))
    if optim_state is not None:
        write_optim_file(ckpt_dir, step, 0, optim_state)
    for stale in optim_ranks(ckpt_dir, step):
        if stale >= optim_files:
            optim_file(ckpt_dir, step, stale).unlink(missing_ok=True)
    write_meta(ckpt_dir, step, meta)
    logger.info("saved checkpoint %s step %d", ckpt_dir, step)


def delete_checkpoint(ckpt_dir: Path, step: int) -> None:
    """Remove one checkpoint, meta first so it never looks complete half-deleted."""
    ckpt_dir = Path(ckpt_dir)
    meta_file(ckpt_dir, step).unlink(missing_ok=True)
    model_file(ckpt_dir, step).unlink(missing_ok=True)
    for rank in optim_ranks(ckpt_dir, step):
        optim_file(ckpt_dir, step, rank).unlink(missing_ok=True)


def prune_checkpoints(ckpt_dir: Path, keep_last: int, candidates: list[int]) -> list[int]:
    """Delete all but the newest `keep_last` of `candidates` (steps this run wrote); returns deleted steps."""
    doomed = sorted(candidates)[:-keep_last] if keep_last > 0 else sorted(candidates)
    for step in doomed:
        delete_checkpoint(ckpt_dir, step)
    if doomed:
        logger.info("keep_last=%d: deleted steps %s from %s", keep_last, doomed, ckpt_dir)
    return doomed


def _read_optim_file(path: Path) -> Any:
    """torch.load of an optimizer file, memory-mapped (a rank reads only the pages it uses)."""
    import torch

    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):
                raise
            return torch.load(path, map_location="cpu", weights_only=False)  # a legacy (non-zip) file
    except Exception as exc:  # noqa: BLE001 - truncated/corrupt files raise many types
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"{path}: cannot read the optimizer file ({reason}).",
            "The file is truncated or corrupt; restore it, or delete the step's optim_*.pt files to continue "
            "with a fresh optimizer.",
        ) from None


def load_optim_payload(ckpt_dir: Path, step: int) -> Any | None:
    """The rank-0 optimizer file's content, or None when absent."""
    path = optim_file(Path(ckpt_dir), step, 0)
    return _read_optim_file(path) if path.exists() else None


def load_optim_set(ckpt_dir: Path, step: int) -> list[dict[str, Any]] | None:
    """Every file of rlab's optimizer set of `step`, in rank order, checked; None when rank 0's file is
    absent or not rlab's (nanochat's shards, say).

    `CheckpointError` when a file of the set is missing, unreadable or belongs to another save.
    """
    from rlab.core.optim_shards import is_own_format  # noqa: PLC0415 - defers torch

    first = load_optim_payload(ckpt_dir, step)
    if not isinstance(first, dict) or not is_own_format(first):
        return None
    ckpt_dir = Path(ckpt_dir)
    world = int(first.get("world_size", 1))
    payloads: list[dict[str, Any]] = [first]
    for rank in range(1, world):
        path = optim_file(ckpt_dir, step, rank)
        if not path.exists():
            raise CheckpointError(
                f"{path.name} is missing: the optimizer state of step {step} in {ckpt_dir} was saved by "
                f"{world} ranks.",
                f"Restore it, or delete optim_{step:06d}_rank*.pt to continue with a fresh optimizer.",
            )
        payload = _read_optim_file(path)
        expected = {k: first.get(k) for k in ("format", "world_size", "save_id")} | {"rank": rank}
        if not isinstance(payload, dict) or any(payload.get(k) != v for k, v in expected.items()):
            raise CheckpointError(
                f"{path}: not rank {rank}'s file of the set rank 0's file belongs to (another save?).",
                f"Restore the step's files together, or delete optim_{step:06d}_rank*.pt for a fresh optimizer.",
            )
        payloads.append(payload)
    return payloads


@dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint is, from its meta and its state-dict keys (no weights read)."""

    path: Path  # the model file
    step: int
    config: GPTConfig  # its shape: the detected architecture, window pattern ("L" without windows) and base

    @property
    def architecture(self) -> str:
        """nanochat-2025 or nanochat-2026."""
        return self.config.architecture

    @property
    def window_pattern(self) -> str:
        return self.config.window_pattern

    @property
    def rotary_base(self) -> float:
        """The base its rope spec uses (the architecture's unless rlab's meta says otherwise)."""
        return float(self.config.rotary_base or get_architecture(self.architecture).rotary_base)

    @property
    def sequence_len(self) -> int:
        return self.config.sequence_len

    def describe(self) -> str:
        """e.g. ``nanochat-2026 (windows SSSL, base 100000)``."""
        windows = (
            f"windows {self.window_pattern}, " if get_architecture(self.architecture).sliding_windows else ""
        )
        return f"{self.architecture} ({windows}base {self.rotary_base:g})"


class UnreadableModelFile(CheckpointError):
    """The model file is missing, truncated or not a state dict (as opposed to a readable file of an unknown
    architecture): the orchestrator warns about it before a clone and the job's own load fails on it."""


def _read_state_dict(path: Path, device: Any = "cpu", mmap: bool = False) -> dict[str, Any]:
    """torch.load of a model file; `CheckpointError` naming it when it is missing, truncated or not a state dict."""
    import torch

    try:
        state = torch.load(path, map_location=device, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise UnreadableModelFile(f"Model file missing: {path}") from None
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError/EOFError/UnpicklingError/... for bad files
        if mmap:  # files of torch's legacy (non-zip) format cannot be mapped
            return _read_state_dict(path, device, mmap=False)
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise UnreadableModelFile(
            f"{path}: cannot read the model file ({reason}).",
            "The file is truncated or corrupt (an interrupted copy?); restore it or choose another step.",
        ) from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise UnreadableModelFile(f"{path}: not a state dict (a mapping of names to tensors).")
    return state


def _info(
    ckpt_dir: Path, step: int, meta: CheckpointMeta, keys: Iterable[str]
) -> tuple[CheckpointInfo, Architecture]:
    path = model_file(ckpt_dir, step)
    arch = detect_architecture(meta, keys, str(path))
    pattern = window_pattern(arch, meta.shape)
    base = float(meta.rope_spec(arch.rotary_base).base or arch.rotary_base)
    shape = {k: getattr(meta.shape, k) for k in NANOCHAT_CONFIG_KEYS}
    config = GPTConfig(**shape, window_pattern=pattern, architecture=arch.name, rotary_base=base)
    info = CheckpointInfo(path=path, step=step, config=config)
    return info, arch


def inspect_checkpoint(ckpt_dir: Path, step: int) -> CheckpointInfo:
    """Architecture, windows, rotary base and length of one checkpoint, from its meta and its keys only.

    Cheap (the model file is memory-mapped, its tensors not read): the orchestrator calls it before
    cloning, so that an unknown architecture, garbage meta or unreadable file fails with one
    `CheckpointError` naming the file (and keys) before anything is written.
    """
    ckpt_dir = Path(ckpt_dir)
    meta = read_meta(ckpt_dir, step)
    path = model_file(ckpt_dir, step)
    keys = state_dict_keys(path)
    if keys is None:  # not readable without torch: torch.load says what is wrong with it
        keys = list(_read_state_dict(path, mmap=True).keys())
    return _info(ckpt_dir, step, meta, keys)[0]


def verify_checkpoint(ckpt_dir: Path, step: int) -> CheckpointInfo:
    """Every check `load_checkpoint_state` makes (meta, file, keys, finite values), on the memory-mapped
    file, nothing kept: what the orchestrator runs on the checkpoints a job will read, before any clone.
    A plain file is read without torch (`rlab.core.torch_zip`); any other is loaded with torch."""
    ckpt_dir = Path(ckpt_dir)
    meta = read_meta(ckpt_dir, step)
    path = model_file(ckpt_dir, step)
    stored = read_tensors(path)
    if isinstance(stored, dict):
        plain = strip_compile_prefix(stored)
        keys, bad = list(plain), [name for name, tensor in plain.items() if not tensor.finite()]
    else:
        state = strip_compile_prefix(_read_state_dict(path, mmap=True))
        keys, bad = list(state), nonfinite_tensors(state)
    info, _ = _info(ckpt_dir, step, meta, keys)
    if bad:
        raise CheckpointError(f"{path}: non-finite values (NaN/Inf) in {key_list(bad)}.")
    return info


def load_checkpoint_state(
    ckpt_dir: Path, step: int, device: Any = "cpu"
) -> tuple[dict[str, Any], CheckpointMeta, CheckpointInfo]:
    """(state dict, meta, info) of one checkpoint, every check done: meta parses, the file reads, the
    keys are a known architecture (patched forward as nanochat's loader does), every tensor is finite.
    Every load (eval, continue, resume, sample) goes through here."""

    ckpt_dir = Path(ckpt_dir)
    meta = read_meta(ckpt_dir, step)
    path = model_file(ckpt_dir, step)
    state = strip_compile_prefix(_read_state_dict(path, device))
    info, arch = _info(ckpt_dir, step, meta, state.keys())
    bad = nonfinite_tensors(state)
    if bad:
        raise CheckpointError(
            f"{path}: non-finite values (NaN/Inf) in {key_list(bad)}.",
            "The weights are unusable; choose an earlier step (`rlab ls` lists them).",
        )
    patch_missing_keys(state, arch, meta.shape.n_layer, device)  # as nanochat's loader patches older files
    return state, meta, info


def load_state_dict_file(ckpt_dir: Path, step: int, device: Any = "cpu") -> dict[str, Any]:
    """The checked, patched model state dict of one checkpoint (`load_checkpoint_state`)."""
    return load_checkpoint_state(ckpt_dir, step, device)[0]


def load_model(
    ckpt_dir: Path, step: int | None = None, device: Any = "cpu", rope: RopeSpec | None = None
) -> tuple[GPT, CheckpointMeta]:
    """(GPT, meta) for `step` (None = newest complete); `rope` overrides the checkpoint's RoPE config."""
    from rlab.core.gpt import GPT  # noqa: PLC0415 - defers torch

    ckpt_dir = Path(ckpt_dir)
    if step is None:
        step = find_last_step(ckpt_dir)
        if step is None:
            raise CheckpointError(
                f"No complete checkpoint in {ckpt_dir}.", hint="Check the base dir and --tag."
            )
    state, meta, info = load_checkpoint_state(ckpt_dir, step, device)
    config = info.config
    spec = rope if rope is not None else meta.rope_spec()
    model = GPT(config, rope=spec.with_original_len(config.sequence_len)).to(device)
    model.load_nanochat_state_dict(state, source=str(info.path))
    return model, meta
