"""The control arm: plain RoPE continued exactly like the variants, so every verdict is "vs rope trained alike".

Without it, the only reference left is the base checkpoint, and a variant's difference from the base mixes the
RoPE change with the extra steps of training. `rlab continue` therefore adds the baseline variant
(`rlab.variants.BASELINE_VARIANT`) to the variants it trains unless the spec or `--variants` already names it,
`--no-control` is given, a `--resume` continues tags already planned (its resolved spec has the control), or the
control's tag exists already.
"""

from __future__ import annotations

from pathlib import Path

from rlab.orchestrate.plan import base_layout
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.rope import RopeSpec
from rlab.variants import BASELINE_VARIANT


def with_control(spec: ExperimentSpec, *, control: bool, resume: bool) -> tuple[ExperimentSpec, list[str]]:
    """`spec` with the control arm first among its variants, and the warnings to print (`--no-control`)."""
    if BASELINE_VARIANT in spec.variants or resume or not spec.variants or _trained(spec):
        return spec, []
    if not control:
        return spec, [no_control_warning()]
    variants = {BASELINE_VARIANT: RopeSpec(variant=BASELINE_VARIANT), **spec.variants}
    return spec.model_copy(update={"variants": variants}), []


def _trained(spec: ExperimentSpec) -> bool:
    """Whether the control's tag exists already (an earlier `continue` of the experiment made it): a later run that
    adds a variant neither refuses on it nor retrains it."""

    return base_layout(spec).checkpoint_dir(spec.tag_for(BASELINE_VARIANT)).exists()


def is_control(spec: ExperimentSpec, variant: str) -> bool:
    """Whether `variant` is the arm the report compares every other with."""
    return variant == BASELINE_VARIANT and len(spec.variants) > 1


def no_control_warning() -> str:
    return (
        f"no control arm (--no-control): `{BASELINE_VARIANT}` is not trained alongside the variants, so the "
        "report gives no better/worse verdicts; compared with the base checkpoint, a variant's difference "
        "would mix its RoPE change with the extra training steps."
    )


def add_control_command(resolved_spec: Path, baseline: str = BASELINE_VARIANT) -> str:
    """The command that trains an experiment's missing control arm afterwards, with the settings its other arms
    were trained with (`resolved_spec`: the experiment's spec.resolved.yaml)."""
    return f"rlab continue --spec {resolved_spec} --variants {baseline}"
