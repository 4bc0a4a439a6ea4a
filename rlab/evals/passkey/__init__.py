"""Passkey retrieval by generation: a key hidden at a depth of filler, read back greedily (`task`), and the
same prompts scored by likelihood (`rlab.evals.retrieval`); adapter: `run`."""

from rlab.evals.definition import LENGTH_SETTINGS, ROPE_EVAL_SETTINGS, OutputFile, package_eval

CELLS_CSV = "passkey.csv"
TRIALS_CSV = "passkey_trials.csv"
CHOICES_CSV = "passkey_choices.csv"

EVAL = package_eval(
    __name__,
    order=40,
    help="Passkey retrieval.",
    shared_settings=("retrieval_choices", *LENGTH_SETTINGS, "seed", *ROPE_EVAL_SETTINGS),
    files=(
        OutputFile(CELLS_CSV, ".records:PasskeyCell"),
        OutputFile(TRIALS_CSV, ".records:PasskeyTrial", report=True),
        OutputFile(CHOICES_CSV, "rlab.evals.retrieval.records:ChoiceTrial", report=True),
    ),
    windowed=True,
    preflight=True,
)
