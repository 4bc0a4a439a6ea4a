"""The files of `evals/<tag>/`, and which eval.json section owns each.

eval.json (`rlab.records.eval_doc.EvalDoc`) describes the tag; each eval's definition names the CSVs its
section owns (`EvalDefinition.files`). A file belongs to one section: when a section is dropped from eval.json
its files go too, so no file is ever left beside an eval.json that does not describe it. `bpb_units.csv`
(`rlab.records.units.BpbUnit`) is shared: each row names its section, and a partial re-eval replaces only the
rows of the sections it re-ran.
"""

from __future__ import annotations

EVAL_JSON = "eval.json"
BPB_UNITS_CSV = "bpb_units.csv"
