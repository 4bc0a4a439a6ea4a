"""results.csv records the sliding-window option (rope.windows) of each tag next to its RoPE numbers."""

from __future__ import annotations

import math

from rlab.report.assemble.wide import order_columns
from rlab.report.sources.frames import meta_row
from rlab.report.sources.tag_files import TagSources
from rlab.spec.rope import RopeSpec
from tests.report.conftest import run_config


def test_windows_is_a_word_column_after_the_rope_numbers():
    rope = RopeSpec(variant="yarn", base=100000.0, factor=4.0, original_len=256, windows="fixed")
    trained = run_config("d2-yarn", "yarn").model_copy(update={"rope": rope})
    row = meta_row("exp", TagSources(tag="d2-yarn", variant="yarn", run_config=trained), None)
    assert row["rope_windows"] == "fixed" and row["rope_base"] == 100000.0
    old = meta_row("exp", TagSources(tag="d2-pi", variant="pi", eval=None), None)  # no run.json, no eval.json
    assert old["rope_windows"] is None and math.isnan(old["rope_factor"])
    cols = order_columns(["tag", "rope_windows", "rope_base", "experiment", "step"])
    assert cols.index("rope_base") < cols.index("rope_windows") < cols.index("step")
