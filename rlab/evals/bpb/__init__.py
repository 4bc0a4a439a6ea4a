"""Train and val bits per byte over fixed sets of whole documents (`score`, `doc_set`; adapter: `run`)."""

from rlab.evals.definition import OutputFile, package_eval

DOCS_CSV = "bpb_docs.csv"

EVAL = package_eval(
    __name__,
    order=10,
    help="Train/val BPB.",
    shared_settings=("seed",),
    files=(OutputFile(DOCS_CSV, ".records:BpbDoc"),),
)
