"""RULER-style synthetic long-context tasks (Hsieh et al. 2024) over the long-document set (`tasks`), and the
same examples scored by likelihood (`rlab.evals.retrieval`); adapter: `run`."""

from rlab.evals.definition import LENGTH_SETTINGS, ROPE_EVAL_SETTINGS, OutputFile, package_eval

CELLS_CSV = "ruler.csv"
TRIALS_CSV = "ruler_trials.csv"
CHOICES_CSV = "ruler_choices.csv"

EVAL = package_eval(
    __name__,
    order=50,
    help="RULER-style synthetic tasks.",
    shared_settings=("retrieval_choices", *LENGTH_SETTINGS, "seed", *ROPE_EVAL_SETTINGS),
    files=(
        OutputFile(CELLS_CSV, ".records:RulerCell"),
        OutputFile(TRIALS_CSV, ".records:RulerTrial"),
        OutputFile(CHOICES_CSV, "rlab.evals.retrieval.records:ChoiceTrial", report=True),
    ),
    inputs=frozenset({"long_docs"}),
    windowed=True,
)
