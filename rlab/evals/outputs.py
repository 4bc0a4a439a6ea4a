"""The files an eval writes into `evals/<tag>/`, and which eval.json section owns each.

Formats are the models of `rlab.records` (eval.json: `EvalDoc`; CSVs: one row model each); this module
only names the files. A file belongs to one section: when a section is dropped from eval.json its files
go too, so no file is ever left beside an eval.json that does not describe it. `bpb_units.csv` is shared:
each row names its section, and a partial re-eval replaces only the rows of the sections it re-ran.
"""

from __future__ import annotations

EVAL_JSON = "eval.json"
BPB_UNITS_CSV = "bpb_units.csv"
BPB_DOCS_CSV = "bpb_docs.csv"
BPB_BY_LENGTH_CSV = "bpb_by_length.csv"
PASSKEY_CSV = "passkey.csv"
PASSKEY_TRIALS_CSV = "passkey_trials.csv"
RULER_CSV = "ruler.csv"
RULER_TRIALS_CSV = "ruler_trials.csv"
PASSKEY_CHOICES_CSV = "passkey_choices.csv"
RULER_CHOICES_CSV = "ruler_choices.csv"
CORE_EXAMPLES_CSV = "core_examples.csv"
COPY_DISTANCE_CSV = "copy_distance.csv"

SECTION_FILES: dict[str, tuple[str, ...]] = {
    "bpb": (BPB_DOCS_CSV,),
    "bpb_length": (BPB_BY_LENGTH_CSV,),
    "core": (CORE_EXAMPLES_CSV,),  # and the experiment's results_<variant>.csv (EvalRunConfig.core_csv)
    "passkey": (PASSKEY_CSV, PASSKEY_TRIALS_CSV, PASSKEY_CHOICES_CSV),
    "ruler": (RULER_CSV, RULER_TRIALS_CSV, RULER_CHOICES_CSV),
    "copy_distance": (COPY_DISTANCE_CSV,),
}
"""Files in `evals/<tag>/` owned by each section, besides its rows of bpb_units.csv."""
