"""Copy by distance: loss on a passage repeated at a known distance vs the same passage unseen (`task`);
adapter: `run`."""

from rlab.evals.definition import LENGTH_SETTINGS, ROPE_EVAL_SETTINGS, OutputFile, package_eval

CSV = "copy_distance.csv"

EVAL = package_eval(
    __name__,
    order=60,
    help="Copy by distance: loss on a passage repeated at a known distance.",
    shared_settings=(*LENGTH_SETTINGS, "seed", *ROPE_EVAL_SETTINGS),
    default=False,
    files=(OutputFile(CSV, ".records:CopyRow", report=True),),
    inputs=frozenset({"long_docs"}),
    windowed=True,
)
