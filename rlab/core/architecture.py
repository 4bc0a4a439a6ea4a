"""The optional parts of rlab's GPT and the attention windows they give, as nanochat computes them.

An `Architecture` lists the parts one nanochat generation switches on; `rlab.core.gpt.GPT` (blocks in
`rlab.core.blocks`) builds exactly those. The generations themselves (which parts, rotary base, the nanochat
commits they were read from), how a checkpoint is told apart and how nanochat's files map onto the model live
in the adapter package `rlab.nanochat`. The window rules here are the model's: nanochat's
`GPT._compute_window_sizes`, and what an eval does past the training length (`eval_window_sizes`).

No torch at import.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rlab.errors import CheckpointError
from rlab.spec.eval import AttentionWindows

NANOCHAT_CONFIG_KEYS = ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd")
"""meta["model_config"] keys of both generations (nanochat-2026 adds window_pattern)."""
SHORT_WINDOW_TILE = 128  # nanochat rounds the short window up to FA3's tile size


@dataclass(frozen=True)
class Architecture:
    """The optional parts one generation switches on; `rlab.core.gpt.GPT` builds exactly these.

    Every part is off by default: a generation names the ones it adds to the plain GPT (nanochat-2025).
    """

    name: str
    nanochat_commits: str
    rotary_base: float
    qk_scale: float = 1.0  # q and k are multiplied by this after the QK-norm
    value_embeds: bool = False  # value embeddings with a per-head gate (alternating layers, last included)
    residual_scalars: bool = False  # resid_lambdas / x0_lambdas before every block
    smear: bool = False  # previous token's embedding mixed in by a gate
    backout: bool = False  # residual after layer n_layer // 2 subtracted before the final norm
    sliding_windows: bool = False  # model_config.window_pattern is honoured


DEFAULT_WINDOW_PATTERN = "L"
"""Every layer full context: nanochat's patch for a model_config without a window_pattern."""


def has_value_embed(layer: int, n_layer: int) -> bool:
    """nanochat's rule: alternating layers, the last always included."""
    return layer % 2 == (n_layer - 1) % 2


def full_context_layers(pattern: str, n_layer: int) -> list[bool]:
    """Per layer, whether the pattern makes it a full-context (L) layer; the last layer always is."""
    letters = [pattern.upper()[i % len(pattern)] for i in range(n_layer)]
    return [c == "L" or i == n_layer - 1 for i, c in enumerate(letters)]


def window_sizes(pattern: str, n_layer: int, context_len: int) -> list[int]:
    """Per layer, how far back a query may attend: key j is visible to query i iff 0 <= i - j <= window.

    nanochat's rule (`GPT._compute_window_sizes`): "L" = `context_len`, "S" = context_len / 4 rounded
    up to a multiple of 128, the pattern tiled over the layers, the last layer always "L". Note that
    an "L" layer is a window too: for inputs longer than `context_len` it sees only the last
    `context_len` + 1 tokens, exactly as nanochat does (`eval_window_sizes` decides what an eval does).
    """
    if not pattern or any(c not in "SL" for c in pattern.upper()):
        raise CheckpointError(f"window_pattern: use only S and L (got {pattern!r}).")
    short = -(-context_len // 4 // SHORT_WINDOW_TILE) * SHORT_WINDOW_TILE
    sizes = [short if pattern.upper()[i % len(pattern)] == "S" else context_len for i in range(n_layer)]
    sizes[-1] = context_len
    return sizes


EVAL_WINDOW_RULES: dict[str, str] = {
    "extend": "full-context layers (window = sequence_len) attend across the whole input; short windows as trained",
    "scale": "every window as nanochat computes it for a model of the input's length (short ones grow too)",
    "capped": "windows as trained: full-context layers see only the last sequence_len tokens",
}


def eval_window_sizes(
    pattern: str, n_layer: int, sequence_len: int, trained_context: int, length: int, rule: AttentionWindows
) -> list[int]:
    """Per layer, the attention window for an input of `length` tokens: the one sizing rule of the model.

    Up to `sequence_len` every rule gives the windows the model trained with (`window_sizes` at
    `trained_context`: sequence_len, or L0 for `rope.windows: fixed`). Beyond it, evaluating at a
    longer length must mean more context, so by default ("extend") the full-context layers (the L layers
    of the pattern, `full_context_layers`, when their trained window spans the whole training row: not
    under `rope.windows: fixed`) get a window of `length`, and short windows stay as trained; "scale" recomputes every window for a model of `length` (only when the windows followed the
    training length: fixed windows stay fixed); "capped" keeps the trained windows (nanochat's behaviour:
    an input past sequence_len is then seen through a window of it).
    """
    trained = window_sizes(pattern, n_layer, trained_context)
    if length <= sequence_len or rule == "capped":
        return trained
    if rule == "scale":
        return window_sizes(pattern, n_layer, length) if trained_context == sequence_len else trained
    full = full_context_layers(pattern, n_layer)
    return [max(w, length) if is_full and w >= sequence_len else w for w, is_full in zip(trained, full)]


def attention_reach(windows: Iterable[int | None], length: int) -> int | None:
    """The farthest back any layer attends in an input of `length` tokens: None when some layer sees the whole
    input (a window of at least length - 1, or no window), else the largest window (the context is capped)."""
    sizes = list(windows)
    if not sizes or any(w is None or w >= length - 1 for w in sizes):
        return None
    return max(w for w in sizes if w is not None)


def key_list(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")
