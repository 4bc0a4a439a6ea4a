"""Which nanochat generation a checkpoint is, told from its meta and its state-dict keys.

A checkpoint is the generation whose key set its keys are, after nanochat's own patches (a meta without
`window_pattern` means "L", full context; missing lambdas mean identity). Any other key set is one
`CheckpointError` naming the keys that fit no generation. No torch at import: `inspect_checkpoint` (in
`rlab.core.checkpoint`) and `rlab ls` use the key sets.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rlab.core.architecture import DEFAULT_WINDOW_PATTERN, Architecture, key_list
from rlab.errors import CheckpointError
from rlab.nanochat.generations import ARCHITECTURES, GENERATIONS, get_architecture
from rlab.nanochat.state_dict import COMPILE_PREFIX, patchable_keys, state_dict_keys

if TYPE_CHECKING:
    from rlab.core.checkpoint_meta import CheckpointMeta, ModelShape


def detect_architecture(meta: CheckpointMeta, keys: Iterable[str], source: str) -> Architecture:
    """The generation whose key set `keys` is (after nanochat's patches); `CheckpointError` naming
    `source` and the keys that fit none. A meta naming its architecture (rlab writes one) must agree."""
    n_layer = meta.shape.n_layer
    found = {k.removeprefix(COMPILE_PREFIX) for k in keys}
    named = meta.architecture
    if named is not None:
        get_architecture(str(named))  # an unknown name is an error on its own
    candidates = []
    for arch in GENERATIONS:
        expected = state_dict_keys(arch, n_layer)
        if found <= expected and expected - found <= patchable_keys(arch):
            candidates.append(arch)
    if candidates:
        arch = candidates[0]
        if named is not None and named != arch.name:
            raise CheckpointError(
                f"{source}: meta says architecture '{named}' but the weights are {arch.name}."
            )
        pattern = (meta.shape.window_pattern or DEFAULT_WINDOW_PATTERN).upper()
        if set(pattern) != {"L"} and not arch.sliding_windows:  # all-"L" means no windows: same model
            raise CheckpointError(
                f"{source}: model_config has window_pattern {pattern!r} but the weights are {arch.name} "
                "(no sliding windows); "
                "an intermediate nanochat version rlab does not support.",
            )
        return arch
    known = set().union(*(state_dict_keys(a, n_layer) for a in GENERATIONS))
    unknown = sorted(found - known)
    nearest = min(GENERATIONS, key=lambda a: len(found ^ state_dict_keys(a, n_layer)))
    missing = sorted(state_dict_keys(nearest, n_layer) - found - patchable_keys(nearest))
    parts = []
    if unknown:
        parts.append(f"unknown keys: {key_list(unknown)}")
    if missing:
        parts.append(f"missing for {nearest.name}: {key_list(missing)}")
    supported = " and ".join(f"{a.name} (nanochat {a.nanochat_commits})" for a in ARCHITECTURES.values())
    raise CheckpointError(
        f"{source}: unknown architecture ({'; '.join(parts)}).",
        f"rlab loads {supported} checkpoints; renamed keys or another nanochat version do not fit.",
    )


def window_pattern(arch: Architecture, shape: ModelShape) -> str:
    """The layer pattern of S(hort)/L(ong) windows; "L" for architectures without windows (nanochat's patch for
    a model_config without one)."""
    if not arch.sliding_windows:
        return DEFAULT_WINDOW_PATTERN
    return (shape.window_pattern or DEFAULT_WINDOW_PATTERN).upper()
