"""nanochat's state-dict keys for each generation, and the patches its own loader applies to older files.

Keys are nanochat's (`transformer.wte.weight`, `transformer.h.{i}.attn.c_{q,k,v,proj}.weight`,
`transformer.h.{i}.mlp.c_{fc,proj}.weight`, `lm_head.weight`, and the 2026 parts by name); rlab's GPT uses the
same names, so a state dict maps one to one once `torch.compile`'s prefix is gone. Missing `resid_lambdas` /
`x0_lambdas` mean identity (ones / zeros), as nanochat's `_patch_missing_keys` fills them in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from rlab.core.architecture import Architecture, has_value_embed

COMPILE_PREFIX = "_orig_mod."  # torch.compile wraps the module and prefixes every key with this
PATCHABLE_KEYS = ("resid_lambdas", "x0_lambdas")
"""The keys nanochat's loader fills in when absent (identity), so older 2026-era files still load."""

V = TypeVar("V")


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


def patchable_keys(arch: Architecture) -> set[str]:
    """The keys of `arch` a file may lack (the loader fills them in)."""
    return set(PATCHABLE_KEYS) if arch.residual_scalars else set()


def strip_compile_prefix(state: Mapping[str, V]) -> dict[str, V]:
    """The state dict with `torch.compile`'s `_orig_mod.` prefix taken off every key (nanochat's loader does too)."""
    return {k.removeprefix(COMPILE_PREFIX): v for k, v in state.items()}


def patch_missing_keys(state: dict[str, Any], arch: Architecture, n_layer: int, device: Any = "cpu") -> None:
    """nanochat's `_patch_missing_keys`: identity `resid_lambdas` (ones) and `x0_lambdas` (zeros) where absent."""
    if not arch.residual_scalars:
        return
    import torch

    state.setdefault("resid_lambdas", torch.ones(n_layer, device=device))
    state.setdefault("x0_lambdas", torch.zeros(n_layer, device=device))
