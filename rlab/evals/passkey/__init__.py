"""Passkey retrieval by generation: a key hidden at a depth of filler, read back greedily (`task`), and the
same prompts scored by likelihood (`rlab.evals.retrieval`); adapter: `run`."""

from rlab.evals.retrieval import retrieval_eval

EVAL = retrieval_eval(__name__, order=40, help="Passkey retrieval.", report_trials=True, preflight=True)
CELLS_CSV, TRIALS_CSV, CHOICES_CSV = (f.name for f in EVAL.files)
