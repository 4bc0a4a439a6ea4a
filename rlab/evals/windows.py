"""How attention windows are sized during an evaluation, applied to the model and stated in eval.json.

A windowed model (nanochat-2026 `window_pattern`) attends at most `window` tokens back in each layer;
its full-context layers have a window of its training length. Evaluated at a longer length with those
windows it would see no more than it trained with, so "BPB at 2x the training length" would be BPB at
the training length again. `eval.attention_windows` decides (`rlab.core.architecture.eval_window_sizes`):
`extend` (default) gives the full-context layers the whole input, `scale` resizes every window for the
input's length, `capped` keeps the trained windows (nanochat's behaviour). The rule goes into the
settings of every section that evaluates past the training length (so arms evaluated under different
rules are not compared), and eval.json's `attention` lists the windows at each length and where the
context is capped, which the report labels.
"""

from __future__ import annotations

from collections.abc import Iterable

from rlab.core.architecture import attention_reach
from rlab.evals import catalog
from rlab.records.eval_doc import AttentionRecord, WindowsAt
from rlab.spec.eval import EvalSpec

NO_WINDOWS = "n/a (no windowed layers)"


def window_setting(model) -> dict[str, str]:
    """The `attention_windows` entry of a windowed section's settings: the rule, or that it cannot matter."""
    return {"attention_windows": model.eval_windows if model.arch.sliding_windows else NO_WINDOWS}


def apply_eval_windows(model, spec: EvalSpec, lengths: Iterable[int]) -> AttentionRecord:
    """Set the model's window rule from the spec; the eval.json `attention` record at `lengths`."""

    model.set_eval_windows(spec.attention_windows)
    at = []
    for length in sorted({int(n) for n in lengths}):
        windows = model.windows_at(length)
        sized = None if all(w is None for w in windows) else [int(w) for w in windows]
        at.append(WindowsAt(length=length, windows=sized, capped_at=attention_reach(windows, length)))
    return AttentionRecord(
        rule=spec.attention_windows,
        windowed=bool(model.arch.sliding_windows),
        sequence_len=int(model.config.sequence_len),
        lengths=at,
    )


def lengths_in_use(spec: EvalSpec, grid: list[int]) -> list[int]:
    """Every input length the long-context evals of `spec` use: the grid and each eval's own lengths (passkey,
    RULER-style and copy lengths: `EvalSettings.own_lengths`, each defaulting to the grid)."""
    out = set(grid)
    for definition in catalog.definitions():
        model = definition.settings_type()
        if model is not None:
            out.update(model.of(spec).own_lengths() or ())
    return sorted(out)
