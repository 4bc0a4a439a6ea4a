"""Passkey retrieval by generation: a key hidden at a depth of filler, read back greedily (`task`), and the
same prompts scored by likelihood (`rlab.evals.retrieval`); adapter: `run`."""

from rlab.evals.definition import OutputFile, package_eval
from rlab.evals.retrieval import RETRIEVAL_SETTINGS, choices_file

CELLS_CSV = "passkey.csv"
TRIALS_CSV = "passkey_trials.csv"
CHOICES_CSV = "passkey_choices.csv"

EVAL = package_eval(
    __name__,
    order=40,
    help="Passkey retrieval.",
    shared_settings=RETRIEVAL_SETTINGS,
    files=(
        OutputFile(CELLS_CSV, ".records:PasskeyCell"),
        OutputFile(TRIALS_CSV, ".records:PasskeyTrial", report=True),
        choices_file(CHOICES_CSV),
    ),
    windowed=True,
    preflight=True,
)
