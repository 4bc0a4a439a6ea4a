"""RULER-style synthetic long-context tasks (Hsieh et al. 2024) over the long-document set (`tasks`), and the
same examples scored by likelihood (`rlab.evals.retrieval`); adapter: `run`."""

from rlab.evals.retrieval import retrieval_eval

EVAL = retrieval_eval(
    __name__, order=50, help="RULER-style synthetic tasks.", inputs=frozenset({"long_docs"})
)
CELLS_CSV, TRIALS_CSV, CHOICES_CSV = (f.name for f in EVAL.files)
