"""BPB vs context length: the same targets at every length (`same_targets`), or YaRN's sliding-window and
truncated perplexity (`sliding`); adapter: `run`."""

from rlab.evals.definition import LENGTH_SETTINGS, ROPE_EVAL_SETTINGS, EvalDefinition, OutputFile

BY_LENGTH_CSV = "bpb_by_length.csv"
TARGETS_CSV = "bpb_targets.csv"

EVAL = EvalDefinition(
    name="bpb_length",
    order=20,
    help="BPB vs length.",
    section="rlab.evals.bpb_length.records:BpbLengthMetric",
    run="rlab.evals.bpb_length.run:run",
    settings_model="rlab.evals.bpb_length.settings:BpbLengthSettings",
    shared_settings=(*LENGTH_SETTINGS, *ROPE_EVAL_SETTINGS),
    files=(
        OutputFile(BY_LENGTH_CSV, "rlab.evals.bpb_length.records:LengthRow"),
        OutputFile(TARGETS_CSV, "rlab.evals.bpb_length.records:TargetLoss", report=True),
    ),
    inputs=frozenset({"long_docs"}),
    windowed=True,
)
