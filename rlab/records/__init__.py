"""The files evals, training and the report exchange: one pydantic model per format, written and read through it.

    eval.json           EvalDoc        records.eval_doc   one per tag; a section per eval, each with how it was measured
    bpb_units.csv       BpbUnit        records.units      nats/bytes per unit (a document for train/val, a block for lengths)
    metrics.jsonl       MetricsRecord  records.metrics_log  one training record per line (train | eval | done | failed)
    results.csv         ResultsRow     records.results_row  one row per tag: provenance columns, then metric columns
    every other CSV     its eval's     rlab/evals/<eval>/records.py (named by the eval's definition: `OutputFile.row`)

An eval's own formats (its eval.json section, its CSV rows) live with the eval; what they share lives here:
`base` (the strict `Record`, `ContractError`, `short_hash`), `rows` (CSV written and read through a row model),
`provenance` (code version, how each section was measured, the checkpoint's facts), `sections` (the `Section`
base and the pieces several sections share). Writers build the models; readers validate through them, so a
field exists in exactly one place. No model carries a confidence interval: intervals are the report's
(`rlab.report.stats.uncertainty`), computed from the units the evals write. pydantic only (no torch, no pandas).
"""
