"""What passkey and the RULER-style tasks share: greedy generation in batches (`generation`) and the same items
scored by likelihood against distractors (`likelihood`, `adapters`); the settings and files of both."""

from typing import Any

from rlab.evals.definition import (
    LENGTH_SETTINGS,
    ROPE_EVAL_SETTINGS,
    EvalDefinition,
    OutputFile,
    package_eval,
    package_names,
)

RETRIEVAL_SETTINGS = ("retrieval_choices", *LENGTH_SETTINGS, "seed", *ROPE_EVAL_SETTINGS)
"""The shared settings a retrieval eval reads."""


def retrieval_eval(
    package: str, *, order: int, help: str, report_trials: bool = False, **options: Any
) -> EvalDefinition:
    """`package_eval` of a retrieval eval, whose files are laid out alike: `<name>.csv` (rows of
    `records.<Name>Cell`), `<name>_trials.csv` (`records.<Name>Trial`; `report_trials`: the report reads it) and
    the likelihood trials `<name>_choices.csv` (`rlab.evals.retrieval.records.ChoiceTrial`, read by the report).
    It reads `RETRIEVAL_SETTINGS` and measures past the training length (windowed)."""
    name, stem = package_names(package)
    files = (
        OutputFile(f"{name}.csv", f".records:{stem}Cell"),
        OutputFile(f"{name}_trials.csv", f".records:{stem}Trial", report=report_trials),
        OutputFile(f"{name}_choices.csv", "rlab.evals.retrieval.records:ChoiceTrial", report=True),
    )
    return package_eval(
        package,
        order=order,
        help=help,
        shared_settings=RETRIEVAL_SETTINGS,
        files=files,
        windowed=True,
        **options,
    )
