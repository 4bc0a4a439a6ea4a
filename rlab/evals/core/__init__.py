"""DCLM CORE: the bundle (`bundle`), prompts (`prompts`), reference and packed scoring (`reference`, `packed`),
the metric (`metric`); adapter: `run`."""

from rlab.evals.definition import EvalDefinition, OutputFile

EXAMPLES_CSV = "core_examples.csv"

EVAL = EvalDefinition(
    name="core",
    order=30,
    help="DCLM CORE.",
    section="rlab.evals.core.records:CoreMetric",
    run="rlab.evals.core.run:run",
    settings_model="rlab.evals.core.settings:CoreSettings",
    shared_settings=("seed",),
    files=(OutputFile(EXAMPLES_CSV, "rlab.evals.core.records:CoreExample", report=True),),
    variant_csv="rlab.evals.core.records:CoreTaskRow",
    inputs=frozenset({"core_bundle"}),
)
