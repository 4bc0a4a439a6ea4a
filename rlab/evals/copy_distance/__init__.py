"""Copy by distance: loss on a passage repeated at a known distance vs the same passage unseen (`task`);
adapter: `run`."""

from rlab.evals.definition import LENGTH_SETTINGS, ROPE_EVAL_SETTINGS, EvalDefinition, OutputFile

CSV = "copy_distance.csv"

EVAL = EvalDefinition(
    name="copy_distance",
    order=60,
    help="Copy by distance: loss on a passage repeated at a known distance.",
    section="rlab.evals.copy_distance.records:CopyDistanceMetric",
    run="rlab.evals.copy_distance.run:run",
    settings_model="rlab.evals.copy_distance.settings:CopyDistanceSettings",
    shared_settings=(*LENGTH_SETTINGS, "seed", *ROPE_EVAL_SETTINGS),
    default=False,
    files=(OutputFile(CSV, "rlab.evals.copy_distance.records:CopyRow", report=True),),
    inputs=frozenset({"long_docs"}),
    windowed=True,
)
