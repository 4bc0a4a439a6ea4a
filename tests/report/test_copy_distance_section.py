"""The report's copy-by-distance section: paired per-record comparisons, verdicts, table, plot, HTML."""

from __future__ import annotations

import numpy as np

from rlab import records as rec
from rlab.evals.outputs import COPY_DISTANCE_CSV
from rlab.report.build import write_report


def _write(fx, tag: str, copy_at_long: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for window, copy in ((64, 0.5), (256, copy_at_long)):
        for i in range(24):
            first = 5.0 + 0.3 * rng.standard_normal()
            rows.append(rec.CopyRow(window=window, distance=window - 40, record=i, first_nats=first,
                                    copy_nats=copy + 0.1 * rng.standard_normal(), copy_acc=0.8, tokens=31))
    rec.write_rows(fx.eval_dir(tag) / COPY_DISTANCE_CSV, rows)


def test_section_compares_arms_on_the_same_records(fx):
    _write(fx, "fx-rope", copy_at_long=4.5, seed=0)  # rope loses the copy at the long distance
    _write(fx, "fx-yarn", copy_at_long=1.0, seed=1)  # yarn keeps it
    out = write_report(fx, fmt="html", n_boot=200)
    md = fx.comparison_md.read_text()
    assert "## Long-range use: copy loss by distance" in md
    line = next(s for s in md.splitlines() if "distance 216 (window 256)" in s)
    assert "yarn 0.98" in line and "rope 4.52" in line and "**better**" in line
    assert "| d=24 (W=64) | d=216 (W=256) |" in md
    assert (fx.plots_dir / "copy_distance.png").is_file() and fx.plots_dir / "copy_distance.png" in out.written
    assert "Long-range use" in fx.comparison_md.with_suffix(".html").read_text()


def test_no_copy_results_no_section(fx):
    write_report(fx, n_boot=200)
    assert "copy loss by distance" not in fx.comparison_md.read_text()
