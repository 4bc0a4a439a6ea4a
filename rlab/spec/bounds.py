"""The ranges a spec's numbers and lists must fall in: wide enough for any real run, narrow enough that a
typo (`seeds: 1000000`, `seq_len: 1e9`, `factor: 1e300`) is an error naming the YAML path and the range,
before anything plans a million tags or builds a rotary table of a billion positions.

`InRange(low, high)` is pydantic metadata for an int or float field (``Annotated[int, InRange(1, 64)]``):
a value outside is ``must be from 1 to 64 (got 1000000)``, and `rlab schema` shows the bounds.
`NonEmpty(max_items)` does the same for a list's length. `shown` renders any value for a message without
ever failing or dumping it whole (Python refuses to print an int of more than 4300 digits).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

MAX_LEN = 2**24
"""Longest sequence, context or eval length (16,777,216 tokens): past every model's context."""
MIN_EVAL_LEN = 16
"""Shortest eval length: BPB-vs-length scores the last length // 2 tokens of each window, the prompts of the
passkey and RULER-style tasks need room for a question, and a window of a few tokens measures nothing."""
MAX_STEPS = 10**9
"""Optimizer steps of one run (and any step cadence)."""
MAX_SEEDS = 64
"""Training replicates per variant (each is a tag and a job)."""
MAX_VARIANTS = 64
"""Variants of one experiment (each is a tag and a job)."""
MAX_PROCS_PER_NODE = 1024
"""Processes per node of one job (GPUs, or CPU ranks)."""
MAX_NODES = 65536
MAX_RESTARTS = 1000
MAX_DEVICE_BATCH = 2**20
"""Sequences per rank per micro-batch."""
MAX_BATCH_TOKENS = 2**40
"""Tokens per optimizer step, or scored by one eval."""
MAX_FACTOR = 1024.0
"""RoPE scale factor: twice the largest published extension (LongRoPE, 512x)."""
MAX_ROTARY_BASE = 1e12
"""Rotary base theta (models use 1e4 to 1e7)."""
MAX_TRIALS = 100_000
"""Trials/records/documents per eval cell."""
MAX_LENGTHS = 64
"""Entries of a list of lengths, depths or phases."""


def shown(value: Any, limit: int = 60) -> str:
    """`value` for an error message: its repr, or the size of a number too long to print, cut at `limit`."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        digits = int(math.log10(abs(value))) + 1
        digits -= 10 ** (digits - 1) > abs(value)  # log10 rounds up just below a power of ten
        return f"a number of {digits:,} digits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int past Python's 4300-digit limit, or deep nesting
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


class InRange:
    """Pydantic metadata: the number must lie in [low, high]."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def check(self, value: Any) -> Any:
        if value is not None and not self.low <= value <= self.high:
            raise ValueError(f"must be from {_number(self.low)} to {_number(self.high)} (got {shown(value)})")
        return value

    def check_number(self, value: Any) -> Any:
        """Before the type's own parsing: a number out of range says so (`1e30` for an int would otherwise be
        "exceeded maximum size"); anything else is left to the type."""
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if is_number and value == value:  # nan is the strict model's business
            return self.check(value)
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        checked = core_schema.no_info_after_validator_function(self.check, handler(source))
        return core_schema.no_info_before_validator_function(self.check_number, checked)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "minimum": self.low, "maximum": self.high}


class NonEmpty:
    """Pydantic metadata: the list (or tuple, or dict) holds 1 to `max_items` entries."""

    def __init__(self, max_items: int = MAX_LENGTHS) -> None:
        self.max_items = max_items

    def check(self, value: Any) -> Any:
        if value is not None and not 1 <= len(value) <= self.max_items:
            raise ValueError(f"must list 1 to {self.max_items} entries (got {len(value)})")
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "minItems": 1, "maxItems": self.max_items}


# The bounded number types the spec models use.
Length = Annotated[int, InRange(1, MAX_LEN)]
"""A sequence or context length in tokens."""
EvalLength = Annotated[int, InRange(MIN_EVAL_LEN, MAX_LEN)]
"""An eval window or prompt length in tokens."""
StepCount = Annotated[int, InRange(0, MAX_STEPS)]
"""A number of optimizer steps (0 allowed)."""
Every = Annotated[int, InRange(1, MAX_STEPS)]
"""A positive step count or cadence."""
Trials = Annotated[int, InRange(1, MAX_TRIALS)]
TokenCount = Annotated[int, InRange(1, MAX_BATCH_TOKENS)]
DeviceBatch = Annotated[int, InRange(1, MAX_DEVICE_BATCH)]
RotaryBase = Annotated[float, InRange(2.0, MAX_ROTARY_BASE)]
"""A rotary base theta (above 1, or the frequencies would not fall with the dimension)."""
