"""Which nanochat generation a checkpoint is, told from its meta and its state-dict keys.

Two generations are known (read from nanochat's `gpt.py` and `checkpoint_manager.py` at each commit):

- ``nanochat-2025`` -- nanochat d314e96 (December 2025), and rlab's own from-scratch models: token
  embedding, blocks (q/k/v/proj, MLP), lm_head; rotary base 10000; every layer fully causal.
- ``nanochat-2026`` -- nanochat a825e63 .. 92d63d4 (March to July 2026). On top of 2025: value
  embeddings on alternating layers (the last always) mixed into v by a per-head gate; per-layer
  `resid_lambdas` / `x0_lambdas` mixing the residual stream with the first (normed) embedding;
  a smear gate mixing the previous token's embedding in; a backout term subtracting the residual
  after layer n_layer // 2 before the final norm; sliding-window attention by `window_pattern`
  (stored in meta's model_config); q and k scaled by 1.2 after the QK-norm; rotary base 100000.

Checkpoints from between the two (January to March 2026: lambdas and value embeddings without
smear/backout, a 32-channel value gate, rotary base 10000, soft-cap 20) and any other key set get one
`CheckpointError` naming the keys that fit neither generation.

Old checkpoints are patched forward as nanochat's own loader does: a meta without `window_pattern`
means "L" (full context), and missing `resid_lambdas` / `x0_lambdas` mean identity (ones / zeros).

No torch at import: `inspect_checkpoint` (in `rlab.core.checkpoint`) and `rlab ls` use the key sets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlab.errors import CheckpointError
from rlab.spec.eval import AttentionWindows

if TYPE_CHECKING:
    from rlab.core.checkpoint_meta import CheckpointMeta, ModelShape

NANOCHAT_CONFIG_KEYS = ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd")
"""meta["model_config"] keys of both generations (nanochat-2026 adds window_pattern)."""
COMPILE_PREFIX = "_orig_mod."  # torch.compile wraps the module and prefixes every key with this
SHORT_WINDOW_TILE = 128  # nanochat rounds the short window up to FA3's tile size


@dataclass(frozen=True)
class Architecture:
    """The optional parts one generation switches on; `rlab.core.gpt.GPT` builds exactly these."""

    name: str
    nanochat_commits: str
    rotary_base: float
    qk_scale: float  # q and k are multiplied by this after the QK-norm
    value_embeds: bool  # per-layer value embeddings with a per-head gate (alternating layers, last included)
    residual_scalars: bool  # resid_lambdas / x0_lambdas before every block
    smear: bool  # previous token's embedding mixed in by a gate
    backout: bool  # residual after layer n_layer // 2 subtracted before the final norm
    sliding_windows: bool  # model_config.window_pattern is honoured


NANOCHAT_2025 = Architecture(
    name="nanochat-2025",
    nanochat_commits="d314e96 (2025-12-09)",
    rotary_base=10000.0,
    qk_scale=1.0,
    value_embeds=False,
    residual_scalars=False,
    smear=False,
    backout=False,
    sliding_windows=False,
)
NANOCHAT_2026 = Architecture(
    name="nanochat-2026",
    nanochat_commits="a825e63 (2026-03-14) .. 92d63d4 (2026-07-03)",
    rotary_base=100000.0,
    qk_scale=1.2,
    value_embeds=True,
    residual_scalars=True,
    smear=True,
    backout=True,
    sliding_windows=True,
)
ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (NANOCHAT_2025, NANOCHAT_2026)}

# The keys nanochat's loader fills in when absent (identity), so older 2026-era files still load.
PATCHABLE_KEYS = ("resid_lambdas", "x0_lambdas")
DEFAULT_WINDOW_PATTERN = "L"


def get_architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise CheckpointError(
            f"Unknown architecture '{name}' (rlab knows {', '.join(ARCHITECTURES)}).",
            "The checkpoint was written by a newer tool than this rlab; update rlab.",
        ) from None


def has_value_embed(layer: int, n_layer: int) -> bool:
    """nanochat's rule: alternating layers, the last always included."""
    return layer % 2 == (n_layer - 1) % 2


def state_dict_keys(arch: Architecture, n_layer: int) -> set[str]:
    """Every key a model of `arch` with `n_layer` blocks has (rotary tables are never saved)."""
    keys = {"transformer.wte.weight", "lm_head.weight"}
    for i in range(n_layer):
        keys |= {f"transformer.h.{i}.attn.c_{n}.weight" for n in ("q", "k", "v", "proj")}
        keys |= {f"transformer.h.{i}.mlp.c_{n}.weight" for n in ("fc", "proj")}
        if arch.value_embeds and has_value_embed(i, n_layer):
            keys |= {f"value_embeds.{i}.weight", f"transformer.h.{i}.attn.ve_gate.weight"}
    if arch.residual_scalars:
        keys |= {"resid_lambdas", "x0_lambdas"}
    if arch.smear:
        keys |= {"smear_gate.weight", "smear_lambda"}
    if arch.backout:
        keys.add("backout_lambda")
    return keys


def detect_architecture(meta: CheckpointMeta, keys: Iterable[str], source: str) -> Architecture:
    """The generation whose key set `keys` is (after nanochat's patches); `CheckpointError` naming
    `source` and the keys that fit none. A meta naming its architecture (rlab writes one) must agree."""
    n_layer = meta.shape.n_layer
    found = {k.removeprefix(COMPILE_PREFIX) for k in keys}
    named = meta.architecture
    if named is not None:
        get_architecture(str(named))  # an unknown name is an error on its own
    candidates = []
    for arch in ARCHITECTURES.values():
        expected = state_dict_keys(arch, n_layer)
        patchable = set(PATCHABLE_KEYS) if arch.residual_scalars else set()
        if found <= expected and expected - found <= patchable:
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
    known = set().union(*(state_dict_keys(a, n_layer) for a in ARCHITECTURES.values()))
    unknown = sorted(found - known)
    nearest = min(ARCHITECTURES.values(), key=lambda a: len(found ^ state_dict_keys(a, n_layer)))
    missing = sorted(
        state_dict_keys(nearest, n_layer)
        - found
        - (set(PATCHABLE_KEYS) if nearest.residual_scalars else set())
    )
    parts = []
    if unknown:
        parts.append(f"unknown keys: {key_list(unknown)}")
    if missing:
        parts.append(f"missing for {nearest.name}: {key_list(missing)}")
    raise CheckpointError(
        f"{source}: unknown architecture ({'; '.join(parts)}).",
        f"rlab loads nanochat-2025 (nanochat {NANOCHAT_2025.nanochat_commits}) and nanochat-2026 "
        f"({NANOCHAT_2026.nanochat_commits}) checkpoints; renamed keys or another nanochat version do not fit.",
    )


def window_pattern(arch: Architecture, shape: ModelShape) -> str:
    """The layer pattern of S(hort)/L(ong) windows; "L" for architectures without windows."""
    if not arch.sliding_windows:
        return DEFAULT_WINDOW_PATTERN
    return (shape.window_pattern or DEFAULT_WINDOW_PATTERN).upper()


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
