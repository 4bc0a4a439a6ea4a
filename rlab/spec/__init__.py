"""Pydantic models for everything a user configures, validated once at the edge.

`*Spec` is what the user wrote (YAML or flags); `RunConfig` / `EvalRunConfig` are the
resolved per-tag configs that the torchrun workers read from a JSON file. This package
imports pydantic only (no torch), so the CLI and the orchestrator stay cheap to import.
"""

from rlab.spec.rope import RopeSpec, RopeVariant

__all__ = ["RopeSpec", "RopeVariant"]
