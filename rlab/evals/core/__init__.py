"""DCLM CORE: the bundle (`bundle`), prompts (`prompts`), reference and packed scoring (`reference`, `packed`),
the metric (`metric`); adapter: `run`."""

from rlab.evals.definition import OutputFile, package_eval

EXAMPLES_CSV = "core_examples.csv"

EVAL = package_eval(
    __name__,
    order=30,
    help="DCLM CORE.",
    shared_settings=("seed",),
    files=(OutputFile(EXAMPLES_CSV, ".records:CoreExample", report=True),),
    variant_csv=".records:CoreTaskRow",
    inputs=frozenset({"core_bundle"}),
    preflight=True,
)
