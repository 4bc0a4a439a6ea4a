"""results.csv records the sliding-window option (rope.windows) of each tag next to its RoPE numbers."""

from __future__ import annotations

import math

from rlab.report.assemble.wide import order_columns
from rlab.report.sources.frames import meta_row
from rlab.report.sources.tag_files import TagSources


def test_windows_is_a_word_column_after_the_rope_numbers():
    rope = {"variant": "yarn", "base": 100000.0, "factor": 4.0, "original_len": 256, "windows": "fixed"}
    row = meta_row("exp", TagSources(tag="d2-yarn", variant="yarn", run_config={"rope": rope}), None)
    assert row["rope_windows"] == "fixed" and row["rope_base"] == 100000.0
    old = meta_row("exp", TagSources(tag="d2-pi", variant="pi", run_config={"rope": {"variant": "pi"}}), None)
    assert old["rope_windows"] is None and math.isnan(old["rope_factor"])  # written before the option existed
    cols = order_columns(["tag", "rope_windows", "rope_base", "experiment", "step"])
    assert cols.index("rope_base") < cols.index("rope_windows") < cols.index("step")
