"""The names of the RoPE variants: a leaf module (no pydantic, no torch) so the CLI can list them at start-up.

The formulas live in `rlab.core.rope`; their parameters are validated by `rlab.spec.rope.RopeSpec`.
"""

from __future__ import annotations

from enum import Enum

from rlab.errors import SpecError, unknown_name_error


class RopeVariant(str, Enum):
    """RoPE variants. The same string is used in YAML, on the CLI, in tags and in results.csv."""

    rope = "rope"
    pi = "pi"
    ntk = "ntk"
    dynamic_ntk = "dynamic-ntk"
    yarn = "yarn"
    llama3 = "llama3"
    abf = "abf"
    ntk_by_parts = "ntk-by-parts"
    longrope = "longrope"


VARIANT_NAMES: tuple[str, ...] = tuple(v.value for v in RopeVariant)

# Variants whose purpose is to extend the context: a factor below 1 would shrink it.
EXTENSION_VARIANTS = frozenset(VARIANT_NAMES) - {"rope"}

# Variants with a parameter no default can stand for: they exist only as a spec defines them (`variants:`),
# never as a bare built-in name (`--variants abf` alone has no new base to raise to).
NEEDS_PARAMETERS: dict[str, str] = {
    "abf": "new_base (the raised rotary base, e.g. 500000)",
    "longrope": "short_factor and long_factor (d/2 numbers each) or factors_file",
}


def parse_variant(name: str) -> RopeVariant:
    """`RopeVariant` from its name in any case (`YaRN` is `yarn`), or an error with a "did you mean" suggestion."""
    try:
        return RopeVariant(name.strip().lower())
    except ValueError:
        raise unknown_name_error("RoPE variant", name, VARIANT_NAMES, SpecError) from None


BASELINE_VARIANT = RopeVariant.rope.value
"""The variant every other is compared with unless told otherwise: `rlab continue` trains it as the control arm
(`rlab.orchestrate.control`) and `rlab report` compares with it (`rlab.report.assemble.pairing.resolve_baseline`)."""
