"""Train and val bits per byte over fixed sets of whole documents (`score`, `doc_set`; adapter: `run`)."""

from rlab.evals.definition import EvalDefinition, OutputFile

DOCS_CSV = "bpb_docs.csv"

EVAL = EvalDefinition(
    name="bpb",
    order=10,
    help="Train/val BPB.",
    section="rlab.evals.bpb.records:BpbMetric",
    run="rlab.evals.bpb.run:run",
    settings_model="rlab.evals.bpb.settings:BpbSettings",
    shared_settings=("seed",),
    files=(OutputFile(DOCS_CSV, "rlab.evals.bpb.records:BpbDoc"),),
)
