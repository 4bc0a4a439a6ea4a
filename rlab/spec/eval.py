"""Evaluation settings shared by every tag of an experiment.

`EvalSpec` is derived, not written: the shared settings below (which evals run, the length grid, dynamic-ntk at
eval time, ...) plus every catalogued eval's own settings model (`rlab/evals/<name>/settings.py`, an
`rlab.evals.settings.EvalSettings`), flat, so a spec says `eval.passkey_trials` and an eval with a setting
of its own touches only its package. An eval reads its own settings typed, `PasskeySettings.of(spec)`; the
shared ones are attributes of `EvalSpec`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field, PositiveFloat, create_model

from rlab.evals import catalog
from rlab.evals.retrieval.settings import RetrievalSettings
from rlab.spec.base import StrictModel
from rlab.spec.bounds import MAX_LENGTHS, DeviceBatch, EvalLength, Length, NonEmpty

if TYPE_CHECKING:
    EvalName = str
else:
    EvalName = Literal[catalog.names()]
"""An eval of the catalog (`rlab.evals.catalog`: one package per eval under rlab/evals/)."""
AttentionWindows = Literal["extend", "scale", "capped"]
"""How windowed layers (nanochat-2026 `window_pattern`) meet an input longer than the model's sequence_len."""


def _evals_description() -> str:
    """The `evals` field's documentation, from the catalog: each eval with what it measures."""
    listed = [
        f"{d.name} ({_lower_first(d.help.rstrip('.'))}{'' if d.default else '; not in the default list'})"
        for d in catalog.definitions()
    ]
    return "Evals to run: " + ", ".join(listed) + "."


def _lower_first(text: str) -> str:
    """`Train/val BPB` -> `train/val BPB`; an acronym (`DCLM CORE`, `RULER-style`) stays as it is."""
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


class TargetMde(StrictModel):
    """The smallest true differences between two arms the experiment should detect: `rlab power` plans units and
    seeds for them, and `rlab continue --dry-run` warns when the planned evals cannot (80% power at each
    family's alpha / m, the level the report quotes its MDEs at). In each endpoint's own units."""

    primary: PositiveFloat = 0.01
    """The primary endpoint (BPB, bits per byte): 0.01 is ~1% of a d20's BPB, the size of the non-PI
    differences context-extension papers report."""
    bpb: PositiveFloat = 0.01
    """Every other BPB endpoint (each length of BPB vs length, train and val BPB), bits per byte."""
    core: PositiveFloat = 0.02
    """CORE (centered accuracy): about 4x nanochat's run-to-run SD of 0.0052 (7 identical runs)."""
    passkey: PositiveFloat = 0.1
    """Passkey accuracy (a fraction): 10 points."""
    copy_gain: PositiveFloat = 0.1
    """Copy gain at one distance (nats/token)."""


class EvalSelection(StrictModel):
    """Which evals run."""

    evals: Annotated[tuple[EvalName, ...], NonEmpty(8)] = Field(
        catalog.default_names(), description=_evals_description()
    )


class LengthGrid(StrictModel):
    """The eval lengths (`rlab.evals.lengths`): the long-context evals measure along them unless they have their own."""

    target_len: Length | None = None
    """The continued-training length the default length grid is built around (its longest length is 2x this);
    null = the experiment's train.seq_len (rlab eval fills it in)."""
    lengths: Annotated[tuple[EvalLength, ...], NonEmpty()] | None = None
    """Context lengths in tokens for BPB-vs-length, passkey and the RULER-style tasks; null = the default grid:
    L0/2, L0, 2*L0, ... up to 2*target_len (L0 = the base's training length, target_len included)."""
    extra_lengths: tuple[EvalLength, ...] = Field((), max_length=MAX_LENGTHS)
    """Lengths added to `lengths` or to the default grid."""


class RopeEvalSettings(StrictModel):
    """How a dynamic-ntk model's frequencies are chosen at eval time (`rlab.evals.rope_eval`)."""

    dynamic_ntk: Literal["per_window", "fixed"] = "per_window"
    """How dynamic-ntk's scale is chosen: per_window (Hugging Face's behaviour: frequencies from each forward's
    own length, so context and frequencies change together along the length axis) or fixed (frequencies
    evaluated once at dynamic_ntk_len for every window)."""
    dynamic_ntk_len: Length | None = None
    """Length at which a fixed dynamic-ntk evaluates its frequencies; null = target_len."""


class RunSettings(StrictModel):
    """How every eval runs: attention windows past the training length, batch, seed; and what power to plan for."""

    attention_windows: AttentionWindows = "extend"
    """Sliding-window models (nanochat-2026) at lengths beyond their sequence_len: extend (default: the
    full-context layers, whose window is the training length, attend across the whole input, so a longer
    eval length means more context; short windows stay as trained), scale (every window as nanochat would
    size it for a model of that length) or capped (windows as trained, nanochat's behaviour: the model then
    sees at most sequence_len tokens back, and the report marks those lengths as capped). No effect on
    models without windows. See rlab.core.architecture.eval_window_sizes."""
    target_mde: TargetMde = TargetMde()
    """Effect sizes the evals should be able to detect (`rlab power`, the power line of `rlab continue --dry-run`);
    planning only: no eval reads it."""
    device_batch_size: DeviceBatch = 8
    """Sequences per forward pass."""
    seed: int = Field(1234)
    """Seed for subsampling, few-shot draws, passkeys and the RULER-style examples."""


SHARED: tuple[tuple[int, type[StrictModel]], ...] = (
    (0, EvalSelection),
    (15, LengthGrid),
    (55, RetrievalSettings),
    (56, RopeEvalSettings),
    (1000, RunSettings),
)
"""The shared settings, each group with where its keys sit among the evals' own (by eval `order`: bpb 10,
bpb_length 20, ..., copy_distance 60), which keeps the spec's keys in the order they have always had (resolved
specs, `rlab schema`)."""
SPEC_DOC = "Which evals run and how big they are."


def _derive() -> type[StrictModel]:
    """`EvalSpec`: one model inheriting every group of settings (fields, validators, docstrings), its keys in
    the order of `SHARED` and the evals' `order` (pydantic lists the fields of the bases from last to first)."""
    own = [(d.order, model) for d in catalog.definitions() if (model := d.settings_type()) is not None]
    groups: list[tuple[int, type[StrictModel]]] = [*SHARED, *own]
    ordered = [model for _, model in sorted(groups, key=lambda g: g[0])]
    check_disjoint(ordered)
    return create_model("EvalSpec", __base__=tuple(reversed(ordered)), __module__=__name__, __doc__=SPEC_DOC)


def check_disjoint(groups: list[type[StrictModel]]) -> None:
    """Two groups declaring one key (or one validator name) would silently keep only one of them."""
    inherited = set(StrictModel.__pydantic_decorators__.model_validators)
    owner: dict[str, type[BaseModel]] = {}
    for group in groups:
        decorators = group.__pydantic_decorators__
        names = [*group.model_fields, *decorators.field_validators, *decorators.model_validators]
        for name in names:
            if name in inherited:
                continue
            first = owner.setdefault(name, group)
            if first is not group:
                raise RuntimeError(
                    f"{first.__name__} and {group.__name__} both declare {name!r} (eval settings)"
                )


if TYPE_CHECKING:

    class EvalSpec(EvalSelection, LengthGrid, RetrievalSettings, RopeEvalSettings, RunSettings):
        """Which evals run and how big they are (what mypy sees: the shared settings; an eval's own are read
        through its settings model, `PasskeySettings.of(spec)`)."""

else:
    EvalSpec = _derive()
