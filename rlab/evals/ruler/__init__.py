"""RULER-style synthetic long-context tasks (Hsieh et al. 2024) over the long-document set (`tasks`), and the
same examples scored by likelihood (`rlab.evals.retrieval`); adapter: `run`."""

from rlab.evals.definition import OutputFile, package_eval
from rlab.evals.retrieval import RETRIEVAL_SETTINGS, choices_file

CELLS_CSV = "ruler.csv"
TRIALS_CSV = "ruler_trials.csv"
CHOICES_CSV = "ruler_choices.csv"

EVAL = package_eval(
    __name__,
    order=50,
    help="RULER-style synthetic tasks.",
    shared_settings=RETRIEVAL_SETTINGS,
    files=(
        OutputFile(CELLS_CSV, ".records:RulerCell"),
        OutputFile(TRIALS_CSV, ".records:RulerTrial"),
        choices_file(CHOICES_CSV),
    ),
    inputs=frozenset({"long_docs"}),
    windowed=True,
)
