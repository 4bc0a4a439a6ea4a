"""Passkey's check before `rlab eval` starts a worker: some prompt fits in the lengths the spec gives."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlab.core.tokenizer import Tokenizer
from rlab.errors import EvalError
from rlab.evals.passkey.settings import PasskeySettings
from rlab.evals.passkey.task import shortest_prompt
from rlab.paths import BaseLayout

if TYPE_CHECKING:
    from rlab.spec.eval import EvalSpec


def preflight(settings: EvalSpec, base: BaseLayout) -> None:
    """Passkey lengths given in the spec that no prompt of this tokenizer fits are an `EvalError` (the worker would
    skip every one of them and fail); the default grid and a base without a tokenizer pass."""
    own = PasskeySettings.of(settings).passkey_lengths
    explicit = own or settings.lengths
    if not explicit or not base.tokenizer_dir.is_dir():
        return
    lengths = [*explicit, *(() if own else settings.extra_lengths)]
    need = shortest_prompt(Tokenizer.from_directory(base.tokenizer_dir))
    if max(lengths) < need:
        key = "eval.passkey_lengths" if own else "eval.lengths"
        raise EvalError(
            f"{key}: no passkey prompt fits in {max(lengths)} tokens with the tokenizer in {base.tokenizer_dir} "
            f"(the shortest takes {need}).",
            f"Give passkey lengths of at least {need} tokens (eval.passkey_lengths), or leave passkey out: --no-passkey.",
        )
