"""What passkey and the RULER-style tasks share: greedy generation in batches (`generation`) and the same items
scored by likelihood against distractors (`likelihood`, `adapters`); the settings and choices file of both."""

from rlab.evals.definition import LENGTH_SETTINGS, ROPE_EVAL_SETTINGS, OutputFile

RETRIEVAL_SETTINGS = ("retrieval_choices", *LENGTH_SETTINGS, "seed", *ROPE_EVAL_SETTINGS)
"""The shared settings a retrieval eval reads."""


def choices_file(name: str) -> OutputFile:
    """A retrieval eval's likelihood trials file (`records.ChoiceTrial`), read by the report."""
    return OutputFile(name, "rlab.evals.retrieval.records:ChoiceTrial", report=True)
