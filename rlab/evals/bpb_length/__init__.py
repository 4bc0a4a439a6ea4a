"""BPB vs context length: the same targets at every length (`same_targets`), or YaRN's sliding-window and
truncated perplexity (`sliding`); adapter: `run`."""

from rlab.evals.definition import LENGTH_SETTINGS, ROPE_EVAL_SETTINGS, OutputFile, package_eval

BY_LENGTH_CSV = "bpb_by_length.csv"
TARGETS_CSV = "bpb_targets.csv"

EVAL = package_eval(
    __name__,
    order=20,
    help="BPB vs length.",
    shared_settings=(*LENGTH_SETTINGS, *ROPE_EVAL_SETTINGS),
    files=(
        OutputFile(BY_LENGTH_CSV, ".records:LengthRow"),
        OutputFile(TARGETS_CSV, ".records:TargetLoss", report=True),
    ),
    inputs=frozenset({"long_docs"}),
    windowed=True,
)
